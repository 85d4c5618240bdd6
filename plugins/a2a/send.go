package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/loom-kernel/loom/effect"
)

// EffectSend is the effect Effects registers: a send to a remote agent.
// Its qualified tool id is "a2a.send:<peer name>", so a grant can allow
// one peer and not another.
const EffectSend = "a2a.send"

// FactTask is the type of the fact a send emits for each state of the
// remote task it observes: {agent, taskId, contextId, state}.
const FactTask = "a2a.task"

// PollInterval is how long a send waits between two reads of a remote
// task that answered submitted or working (an agent that does not block
// its message/send until the task settles); MaxPolls bounds the reads,
// after which the step completes with the state it last read.
const (
	PollInterval = time.Second
	MaxPolls     = 600
)

// SendInput is the input of the a2a.send effect, recorded as the step's
// input (it holds no credential). Message is sent as a text part; Data,
// when set, as a data part after it. TaskID and ContextID continue a
// remote task: the answer to an input-required task goes to its TaskID.
type SendInput struct {
	Agent     string          `json:"agent"`
	Message   string          `json:"message,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	TaskID    string          `json:"taskId,omitempty"`
	ContextID string          `json:"contextId,omitempty"`
}

// Effects registers the a2a.send effect for peers, for loom.Config.Effects
// (through effect.NewRegistry). A step whose tool id is
// "a2a.send:<name>" runs it, and sends its SendInput to that peer: an
// input naming another peer, or none of peers, is refused with
// ErrUnknownPeer before anything is sent, so a grant of one peer's tool id
// never reaches another. The step's output is the remote task's Outcome,
// and each state of the task it observes is emitted as a FactTask fact.
// The message id is derived from the step's idempotency key, so a crash
// re-run of the same attempt sends the same message id (a remote agent
// that deduplicates by it does the work once). A completed send is served
// from the log on replay: the remote agent is not called again. Transport
// and protocol failures are *RemoteError (untyped: a re-drive sends
// again); a remote task that fails is an Outcome in state failed, not an
// error.
func Effects(peers ...*Peer) map[string]effect.Func {
	byName := make(map[string]*Peer, len(peers))
	for _, p := range peers {
		if p != nil {
			byName[p.name] = p
		}
	}
	return map[string]effect.Func{EffectSend: func(ec *effect.Context, input json.RawMessage) (json.RawMessage, error) {
		in, err := decodeSend(input)
		if err != nil {
			return nil, err
		}
		if _, qualifier, ok := strings.Cut(ec.ToolID, ":"); ok && qualifier != in.Agent {
			return nil, fmt.Errorf("%w: the tool id %q does not name agent %q", ErrUnknownPeer, ec.ToolID, in.Agent)
		}
		p, ok := byName[in.Agent]
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownPeer, in.Agent)
		}
		out, err := p.send(ec, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}}
}

// decodeSend decodes and checks a send's input.
func decodeSend(input json.RawMessage) (SendInput, error) {
	var in SendInput
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return SendInput{}, fmt.Errorf("%w: %v", ErrInvalidSend, err)
	}
	if in.Message == "" && len(in.Data) == 0 {
		return SendInput{}, fmt.Errorf("%w: no message and no data", ErrInvalidSend)
	}
	if len(in.Data) > 0 && !json.Valid(in.Data) {
		return SendInput{}, fmt.Errorf("%w: data is not JSON", ErrInvalidSend)
	}
	return in, nil
}

// send sends in to p under ec and follows the task until it settles.
func (p *Peer) send(ec *effect.Context, in SendInput) (Outcome, error) {
	ctx := ec.Ctx()
	msg, err := messageOf(in)
	if err != nil {
		return Outcome{}, err
	}
	msg.ID = messageID(ec.IdempotencyKey)
	res, err := p.client.SendMessage(ctx, &protocol.SendMessageRequest{Message: msg})
	if err != nil {
		return Outcome{}, &RemoteError{Agent: p.name, Op: "SendMessage", Err: err}
	}
	var out Outcome
	switch r := res.(type) {
	case *protocol.Task:
		out = outcomeOfTask(p.name, r)
	case *protocol.Message:
		out = outcomeOfMessage(p.name, r)
	default:
		return Outcome{}, &RemoteError{Agent: p.name, Op: "SendMessage", Err: ErrNoReply}
	}
	if err := emitState(ec, out); err != nil {
		return Outcome{}, err
	}
	return p.follow(ctx, ec, out)
}

// follow reads a task that is still submitted or working until it settles
// (terminal, input- or auth-required), at most MaxPolls times.
func (p *Peer) follow(ctx context.Context, ec *effect.Context, out Outcome) (Outcome, error) {
	for i := 0; i < MaxPolls && out.TaskID != "" && (out.State == StateSubmitted || out.State == StateWorking); i++ {
		t := time.NewTimer(PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return Outcome{}, ctx.Err()
		case <-t.C:
		}
		task, err := p.client.GetTask(ctx, &protocol.GetTaskRequest{ID: protocol.TaskID(out.TaskID)})
		if err != nil {
			return Outcome{}, &RemoteError{Agent: p.name, Op: "GetTask", Err: err}
		}
		next := outcomeOfTask(p.name, task)
		if next.State != out.State {
			if err := emitState(ec, next); err != nil {
				return Outcome{}, err
			}
		}
		out = next
	}
	return out, nil
}

// emitState records the task's state as a FactTask fact.
func emitState(ec *effect.Context, o Outcome) error {
	return ec.Emit(FactTask, map[string]string{"agent": o.Agent, "taskId": o.TaskID, "contextId": o.ContextID, "state": string(o.State)})
}

// messageOf builds the user message of a send.
func messageOf(in SendInput) (*protocol.Message, error) {
	var parts []*protocol.Part
	if in.Message != "" {
		parts = append(parts, protocol.NewTextPart(in.Message))
	}
	if len(in.Data) > 0 {
		var v any
		if err := json.Unmarshal(in.Data, &v); err != nil {
			return nil, fmt.Errorf("%w: data: %v", ErrInvalidSend, err)
		}
		parts = append(parts, protocol.NewDataPart(v))
	}
	msg := protocol.NewMessage(protocol.MessageRoleUser, parts...)
	msg.TaskID = protocol.TaskID(in.TaskID)
	msg.ContextID = in.ContextID
	return msg, nil
}

// messageID derives a message id from a step attempt's idempotency key,
// hashed so the remote agent learns nothing of the execution's ids.
func messageID(key string) string {
	sum := sha256.Sum256([]byte("a2a.message\x00" + key))
	return hex.EncodeToString(sum[:16])
}
