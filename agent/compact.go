package agent

import (
	"fmt"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
)

// Compactor shortens a transcript that grew too large: it returns the
// messages to continue with. It runs in flow code, so whatever it does that
// is not a pure function of its input must be a durable step (Summarizer's
// model call is one), under stepID.
type Compactor interface {
	Compact(ctx *loom.Context, stepID string, messages []llm.Message) ([]llm.Message, error)
}

// Summarizer is a Compactor that asks a model to summarize all but the
// last Keep messages into one user message, as a durable llm.Complete step.
type Summarizer struct {
	Provider llm.Provider
	Model    string
	// Keep is how many recent messages stay as they are (default 4). The
	// kept tail never starts with tool results, which need the call before
	// them.
	Keep int
	// Prompt is the summarizing instruction (a default asks for the facts,
	// decisions and open questions).
	Prompt string
}

const defaultSummaryPrompt = "Summarize the conversation so far for your own later use: the facts found, the actions taken and their results, the decisions made and what is still open. Be complete and brief."

// Compact implements Compactor.
func (s Summarizer) Compact(ctx *loom.Context, stepID string, messages []llm.Message) ([]llm.Message, error) {
	keep := s.Keep
	if keep <= 0 {
		keep = 4
	}
	cut := len(messages) - keep
	for cut > 0 && messages[cut].Role == llm.RoleTool {
		cut--
	}
	if cut <= 0 {
		return messages, nil
	}
	prompt := s.Prompt
	if prompt == "" {
		prompt = defaultSummaryPrompt
	}
	var b strings.Builder
	for _, m := range messages[:cut] {
		b.WriteString(string(m.Role) + ": " + m.Text)
		for _, c := range m.ToolCalls {
			b.WriteString(fmt.Sprintf(" [calls %s %s]", c.Name, c.Arguments))
		}
		for _, r := range m.ToolResults {
			b.WriteString(fmt.Sprintf(" [%s answered %s]", r.Name, r.Content))
		}
		b.WriteString("\n")
	}
	resp, err := llm.Complete(ctx, stepID, s.Provider, llm.Request{Model: s.Model, System: prompt,
		Messages: []llm.Message{llm.UserText(b.String())}})
	if err != nil {
		return nil, err
	}
	out := []llm.Message{llm.UserText("Summary of the conversation so far:\n" + resp.Text)}
	if messages[cut].Role == llm.RoleUser {
		// Two user messages in a row: fold the summary into the next one.
		out[0].Text += "\n\n" + messages[cut].Text
		cut++
	}
	return append(out, messages[cut:]...), nil
}

// TranscriptWarningEvent is the event type of the one-time warning that a
// run's transcript passed Config.WarnTranscriptBytes.
const TranscriptWarningEvent = "agent.transcript.large"

// compact runs the Compactor before turn when the request has grown past
// CompactAtBytes.
func (a *run) compact(turn int) error {
	if a.cfg.Compactor == nil || a.cfg.CompactAtBytes <= 0 || a.size <= a.cfg.CompactAtBytes {
		return nil
	}
	msgs, err := a.cfg.Compactor.Compact(a.ctx, a.stepID(turn, "compact"), a.res.Messages)
	if err != nil {
		return fmt.Errorf("agent %q: compacting before turn %d: %w", a.cfg.ID, turn, err)
	}
	a.reset(msgs)
	return nil
}

// warnIfLarge records one warning per run when the transcript passes the
// threshold (a replay's warning matches the recorded one: it is not
// appended again).
func (a *run) warnIfLarge(turn int) {
	if a.warned || a.cfg.WarnTranscriptBytes < 0 || a.size <= a.cfg.WarnTranscriptBytes {
		return
	}
	a.warned = true
	_ = a.ctx.Emit(TranscriptWarningEvent, map[string]any{"agent": a.cfg.ID, "turn": turn, "bytes": a.size,
		"threshold": a.cfg.WarnTranscriptBytes,
		"hint":      "every turn sends the whole transcript to the model: set Config.Compactor and CompactAtBytes"})
}
