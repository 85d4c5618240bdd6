package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/loom-kernel/loom/llm"
)

// answer assembles a Response from one generateContent answer or from the
// chunks of a stream, in arrival order: text parts are concatenated (thought
// summaries skipped), each functionCall part is one tool call (the Gemini
// API sends a call whole, never in fragments), and the last finish reason,
// prompt feedback and usage seen win (a stream's usage is a running total).
type answer struct {
	model     string
	text      strings.Builder
	calls     []llm.ToolCall
	candidate bool
	reason    genai.FinishReason
	finishMsg string
	blocked   genai.BlockedReason
	blockMsg  string
	usage     *genai.GenerateContentResponseUsageMetadata
}

// add folds one response (or chunk) in, passing each text fragment and each
// tool call to sink when it is non-nil.
func (a *answer) add(resp *genai.GenerateContentResponse, sink func(llm.Delta)) {
	if resp == nil {
		return
	}
	if resp.ModelVersion != "" {
		a.model = resp.ModelVersion
	}
	if resp.UsageMetadata != nil {
		a.usage = resp.UsageMetadata
	}
	if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" && pf.BlockReason != genai.BlockedReasonUnspecified {
		a.blocked, a.blockMsg = pf.BlockReason, pf.BlockReasonMessage
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		return
	}
	c := resp.Candidates[0]
	a.candidate = true
	if c.FinishReason != "" {
		a.reason, a.finishMsg = c.FinishReason, c.FinishMessage
	}
	if c.Content == nil {
		return
	}
	for _, part := range c.Content.Parts {
		switch {
		case part == nil || part.Thought:
		case part.FunctionCall != nil:
			call := toolCall(part.FunctionCall, len(a.calls))
			if sink != nil {
				sink(llm.Delta{ToolIndex: len(a.calls), ToolID: call.ID, ToolName: call.Name, Arguments: string(call.Arguments)})
			}
			a.calls = append(a.calls, call)
		case part.Text != "":
			a.text.WriteString(part.Text)
			if sink != nil {
				sink(llm.Delta{Text: part.Text})
			}
		}
	}
}

// toolCall translates a functionCall part. The API may omit the call's id:
// one is then made from its position in the answer, "call_<index>", so a
// replayed answer names the same ids. The args map is re-encoded as JSON;
// the SDK has already parsed its numbers into float64 (50 stays 50, but a
// number's original spelling is not kept, and an integer beyond 2^53 loses
// precision).
func toolCall(fc *genai.FunctionCall, index int) llm.ToolCall {
	id := fc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(index)
	}
	args := json.RawMessage(`{}`)
	if len(fc.Args) > 0 {
		if raw, err := json.Marshal(fc.Args); err == nil {
			args = raw
		}
	}
	return llm.ToolCall{ID: id, Name: fc.Name, Arguments: args}
}

// finish returns the assembled Response, or the *llm.Error the answer is: a
// blocked prompt or a safety-family finish reason is KindRefused, a
// malformed or unexpected function call KindMalformed (another attempt may
// do better), an answer with no candidate at all KindMalformed.
func (a *answer) finish(provider, requested string) (llm.Response, error) {
	if a.blocked != "" {
		msg := fmt.Sprintf("the prompt was blocked (%s)", a.blocked)
		if a.blockMsg != "" {
			msg += ": " + a.blockMsg
		}
		return llm.Response{}, llm.NewError(provider, llm.KindRefused, 0, msg, nil)
	}
	if !a.candidate {
		return llm.Response{}, llm.NewError(provider, llm.KindMalformed, 0, "the answer has no candidate", nil)
	}
	stop, kind := stopReason(a.reason)
	if kind != "" {
		msg := fmt.Sprintf("the answer was stopped (%s)", a.reason)
		if a.finishMsg != "" {
			msg += ": " + a.finishMsg
		}
		return llm.Response{}, llm.NewError(provider, kind, 0, msg, nil)
	}
	if len(a.calls) > 0 {
		stop = llm.StopToolUse
	}
	model := a.model
	if model == "" {
		model = requested
	}
	return llm.Response{Model: model, Text: a.text.String(), ToolCalls: a.calls, StopReason: stop, Usage: usageOf(a.usage)}, nil
}

// stopReason maps a finish reason onto the SPI's stop reasons, or onto the
// failure kind it is. Gemini reports a stop sequence as STOP, so
// llm.StopSequence never comes back; an unknown or unset reason is StopEnd.
func stopReason(r genai.FinishReason) (llm.StopReason, llm.Kind) {
	switch r {
	case genai.FinishReasonMaxTokens:
		return llm.StopMaxTokens, ""
	case genai.FinishReasonSafety, genai.FinishReasonRecitation, genai.FinishReasonProhibitedContent,
		genai.FinishReasonBlocklist, genai.FinishReasonSPII, genai.FinishReasonLanguage,
		genai.FinishReasonImageSafety, genai.FinishReasonImageProhibitedContent, genai.FinishReasonImageRecitation:
		return "", llm.KindRefused
	case genai.FinishReasonMalformedFunctionCall, genai.FinishReasonUnexpectedToolCall, genai.FinishReasonTooManyToolCalls:
		return "", llm.KindMalformed
	}
	return llm.StopEnd, ""
}

// usageOf maps usageMetadata. promptTokenCount includes
// cachedContentTokenCount, so InputTokens is their difference (plus the
// prompt tokens of tool use); thinking tokens are billed as output. The
// API reports no cache writes.
func usageOf(u *genai.GenerateContentResponseUsageMetadata) llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	cached := int64(u.CachedContentTokenCount)
	return llm.Usage{
		InputTokens:     max(int64(u.PromptTokenCount)-cached, 0) + int64(u.ToolUsePromptTokenCount),
		OutputTokens:    int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		CacheReadTokens: cached,
	}
}
