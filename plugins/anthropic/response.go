package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/loom-kernel/loom/llm"
)

// response translates a whole Messages API message, received or assembled
// from a stream, into the neutral Response: the text blocks concatenated,
// the tool_use blocks as tool calls in order with their ids, the stop
// reason, and the usage. A refusal (stop_reason "refusal") is an *llm.Error
// of KindRefused; a message without a stop reason is KindMalformed.
// Blocks of other kinds (thinking, server tools) are not part of the SPI
// and are left out.
func (p *Provider) response(msg *sdk.Message) (llm.Response, error) {
	if msg.StopReason == sdk.StopReasonRefusal {
		return llm.Response{}, p.refusal(msg.StopDetails)
	}
	stop, ok := stopReason(msg.StopReason)
	if !ok {
		return llm.Response{}, llm.NewError(p.name, llm.KindMalformed, http.StatusOK, "the answer has no stop reason", nil)
	}
	out := llm.Response{Model: string(msg.Model), StopReason: stop, Usage: usage(msg.Usage)}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := bytes.Clone(b.Input)
			if len(bytes.TrimSpace(args)) == 0 {
				args = []byte(`{}`)
			}
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: json.RawMessage(args)})
		}
	}
	out.Text = text.String()
	return out, nil
}

// stopReason maps the API's stop reasons onto the SPI's; ok is false for
// none. model_context_window_exceeded (the answer ran into the context
// window while being written) is a cut-off answer like max_tokens.
// pause_turn (a server-tool turn paused; this provider declares no server
// tools) and a reason newer than this code end the turn.
func stopReason(r sdk.StopReason) (llm.StopReason, bool) {
	switch r {
	case "":
		return "", false
	case sdk.StopReasonToolUse:
		return llm.StopToolUse, true
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return llm.StopMaxTokens, true
	case sdk.StopReasonStopSequence:
		return llm.StopSequence, true
	}
	return llm.StopEnd, true
}

// usage maps the API's counts. Its input_tokens already leaves out the
// tokens read from and written to the prompt cache, as llm.Usage does.
func usage(u sdk.Usage) llm.Usage {
	return llm.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// refusal is the KindRefused error of a refused answer, carrying the
// policy category and the API's explanation when it gives them.
func (p *Provider) refusal(d sdk.RefusalStopDetails) error {
	msg := "the model refused to answer"
	if d.Category != "" {
		msg += " (" + string(d.Category) + ")"
	}
	if d.Explanation != "" {
		msg += ": " + d.Explanation
	}
	return llm.NewError(p.name, llm.KindRefused, http.StatusOK, msg, nil)
}
