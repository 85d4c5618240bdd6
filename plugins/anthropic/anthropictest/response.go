package anthropictest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// The number of pieces a streamed text block and a tool call's arguments
// are cut into (llmtest.Chunks).
const (
	textPieces = 4
	argPieces  = 3
)

// wireMessageOut is a Messages API message, the body of a 200.
type wireMessageOut struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []wireBlockOut  `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	StopDetails  *refusalDetails `json:"stop_details"`
	Usage        wireUsage       `json:"usage"`
}

// wireBlockOut is an output content block: text or tool_use.
type wireBlockOut struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type refusalDetails struct {
	Type        string `json:"type"`
	Category    string `json:"category"`
	Explanation string `json:"explanation"`
}

// wireUsage is the API's usage: input_tokens excludes the cache's tokens.
type wireUsage struct {
	InputTokens              int64  `json:"input_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	ServiceTier              string `json:"service_tier"`
}

// renderMessage renders a neutral response as the API's message: its text
// block, then its tool_use blocks.
func renderMessage(id string, r llm.Response) wireMessageOut {
	reason, sequence := wireStop(r.StopReason)
	msg := wireMessageOut{ID: id, Type: "message", Role: "assistant", Model: r.Model, Content: []wireBlockOut{},
		StopReason: &reason, StopSequence: sequence,
		Usage: wireUsage{InputTokens: r.Usage.InputTokens, CacheCreationInputTokens: r.Usage.CacheWriteTokens,
			CacheReadInputTokens: r.Usage.CacheReadTokens, OutputTokens: r.Usage.OutputTokens, ServiceTier: "standard"}}
	if r.Text != "" {
		msg.Content = append(msg.Content, wireBlockOut{Type: "text", Text: &r.Text})
	}
	for _, c := range r.ToolCalls {
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		msg.Content = append(msg.Content, wireBlockOut{Type: "tool_use", ID: c.ID, Name: c.Name, Input: args})
	}
	return msg
}

// refused turns a message into a refusal: no content, stop_reason
// "refusal" and its details.
func refused(msg wireMessageOut, explanation string) wireMessageOut {
	reason := "refusal"
	msg.Content, msg.StopReason, msg.StopSequence = []wireBlockOut{}, &reason, nil
	msg.StopDetails = &refusalDetails{Type: "refusal", Category: "general_harms", Explanation: explanation}
	return msg
}

func wireStop(r llm.StopReason) (string, *string) {
	switch r {
	case llm.StopToolUse:
		return "tool_use", nil
	case llm.StopMaxTokens:
		return "max_tokens", nil
	case llm.StopSequence:
		sequence := "\n\nObservation:"
		return "stop_sequence", &sequence
	}
	return "end_turn", nil
}

// events is a server-sent-event writer, flushing each event.
type events struct {
	w http.ResponseWriter
	f http.Flusher
}

func (e events) send(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("anthropictest: encoding a %s event: %v", name, err)) // every event type here encodes
	}
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	e.f.Flush()
}

// writeStream renders msg as the API streams it: message_start (no content, no
// stop reason, the input usage), a ping, each block as content_block_start,
// its deltas (text_delta pieces; an empty input_json_delta and then
// argument pieces) and content_block_stop, then message_delta (the stop
// reason and the output tokens) and message_stop. With hang it stops after
// the first text delta and holds the stream open until ctx is done.
func writeStream(ctx context.Context, e events, msg wireMessageOut, hang bool) {
	start := msg
	start.Content, start.StopReason, start.StopSequence, start.StopDetails = []wireBlockOut{}, nil, nil, nil
	start.Usage.OutputTokens = min(1, msg.Usage.OutputTokens)
	e.send("message_start", map[string]any{"type": "message_start", "message": start})
	e.send("ping", map[string]any{"type": "ping"})
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			empty := ""
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": wireBlockOut{Type: "text", Text: &empty}})
			for _, piece := range llmtest.Chunks(*b.Text, textPieces) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": piece}})
				if hang {
					<-ctx.Done()
					return
				}
			}
		case "tool_use":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": wireBlockOut{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage(`{}`)}})
			for _, piece := range append([]string{""}, llmtest.Chunks(string(b.Input), argPieces)...) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
			}
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if hang {
		<-ctx.Done()
		return
	}
	delta := map[string]any{"stop_reason": msg.StopReason, "stop_sequence": msg.StopSequence, "stop_details": msg.StopDetails}
	e.send("message_delta", map[string]any{"type": "message_delta", "delta": delta,
		"usage": map[string]any{"output_tokens": msg.Usage.OutputTokens}})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
