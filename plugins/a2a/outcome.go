package a2a

import (
	"encoding/json"
	"strings"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
)

// State is a remote task's state, in the protocol's lower-case words.
type State string

// The states of a remote task.
const (
	StateSubmitted     State = "submitted"
	StateWorking       State = "working"
	StateInputRequired State = "input-required"
	StateAuthRequired  State = "auth-required"
	StateCompleted     State = "completed"
	StateFailed        State = "failed"
	StateCanceled      State = "canceled"
	StateRejected      State = "rejected"
	StateUnknown       State = "unknown"
)

// Terminal reports whether the task has ended: completed, failed, canceled
// or rejected.
func (s State) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCanceled, StateRejected:
		return true
	}
	return false
}

// stateOf maps the SDK's task state.
func stateOf(s protocol.TaskState) State {
	switch s {
	case protocol.TaskStateSubmitted:
		return StateSubmitted
	case protocol.TaskStateWorking:
		return StateWorking
	case protocol.TaskStateInputRequired:
		return StateInputRequired
	case protocol.TaskStateAuthRequired:
		return StateAuthRequired
	case protocol.TaskStateCompleted:
		return StateCompleted
	case protocol.TaskStateFailed:
		return StateFailed
	case protocol.TaskStateCanceled:
		return StateCanceled
	case protocol.TaskStateRejected:
		return StateRejected
	}
	return StateUnknown
}

// Outcome is what a send to a remote agent came to, recorded as the
// a2a.send step's output: the remote task (its ids and the state it
// reached), the text of its status message (else of its artifacts), and
// its artifacts. For an input-required task, Gate and InputSchema carry
// the remote gate and the JSON Schema its answer must satisfy when the
// remote agent says so (a Loom server does, in the status message's
// metadata). An agent that answers with a message and no task gives an
// Outcome in state completed with no TaskID.
type Outcome struct {
	Agent       string          `json:"agent"`
	TaskID      string          `json:"taskId,omitempty"`
	ContextID   string          `json:"contextId,omitempty"`
	State       State           `json:"state"`
	Text        string          `json:"text,omitempty"`
	Artifacts   []Artifact      `json:"artifacts,omitempty"`
	Gate        string          `json:"gate,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Artifact is one artifact of a remote task: its text parts joined, and
// its data parts as JSON.
type Artifact struct {
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
	Text string            `json:"text,omitempty"`
	Data []json.RawMessage `json:"data,omitempty"`
}

// Metadata keys a Loom server sets on an input-required status message,
// and a Loom client reads back.
const (
	MetaGate   = "loom.gate"
	MetaSchema = "loom.schema"
)

// MaxOutcomeTextBytes bounds the text an Outcome carries (status and each
// artifact); longer text is cut, marked with "…".
const MaxOutcomeTextBytes = 64 << 10

// outcomeOfTask maps a remote task to its Outcome.
func outcomeOfTask(agent string, t *protocol.Task) Outcome {
	o := Outcome{Agent: agent, TaskID: string(t.ID), ContextID: t.ContextID, State: stateOf(t.Status.State)}
	if m := t.Status.Message; m != nil {
		o.Text = textOf(m.Parts)
		if g, ok := m.Metadata[MetaGate].(string); ok {
			o.Gate = g
		}
		if s, ok := m.Metadata[MetaSchema]; ok {
			if raw, err := json.Marshal(s); err == nil {
				o.InputSchema = raw
			}
		}
	}
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		out := Artifact{ID: string(a.ID), Name: a.Name, Text: textOf(a.Parts)}
		for _, p := range a.Parts {
			if p == nil {
				continue
			}
			if d, ok := p.Content.(protocol.Data); ok {
				if raw, err := json.Marshal(d.Value); err == nil {
					out.Data = append(out.Data, raw)
				}
			}
		}
		o.Artifacts = append(o.Artifacts, out)
	}
	if o.Text == "" {
		var texts []string
		for _, a := range o.Artifacts {
			if a.Text != "" {
				texts = append(texts, a.Text)
			}
		}
		o.Text = bound(strings.Join(texts, "\n"))
	}
	return o
}

// outcomeOfMessage maps a message reply (no task) to its Outcome.
func outcomeOfMessage(agent string, m *protocol.Message) Outcome {
	return Outcome{Agent: agent, TaskID: string(m.TaskID), ContextID: m.ContextID, State: StateCompleted, Text: textOf(m.Parts)}
}

// textOf joins the text parts of parts, bounded.
func textOf(parts protocol.ContentParts) string {
	var texts []string
	for _, p := range parts {
		if p == nil {
			continue
		}
		if t, ok := p.Content.(protocol.Text); ok {
			texts = append(texts, string(t))
		}
	}
	return bound(strings.Join(texts, "\n"))
}

// bound cuts s to MaxOutcomeTextBytes on a rune boundary.
func bound(s string) string {
	if len(s) <= MaxOutcomeTextBytes {
		return s
	}
	cut := MaxOutcomeTextBytes
	for cut > 0 && !runeStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
