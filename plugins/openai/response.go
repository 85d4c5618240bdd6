package openai

import (
	"encoding/json"
	"strings"

	sdk "github.com/openai/openai-go/v3"

	"github.com/loom-kernel/loom/llm"
)

// response translates a whole (non-streamed) chat completion; only the
// first choice counts (the provider never asks for n > 1).
func (p *Provider) response(c *sdk.ChatCompletion, key string) (llm.Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return llm.Response{}, p.newError(llm.KindMalformed, 0, "the chat completion has no choices", nil, key)
	}
	choice := c.Choices[0]
	var calls []llm.ToolCall
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return llm.Response{}, p.newError(llm.KindMalformed, 0, "a tool call of type "+tc.Type+", not function", nil, key)
		}
		calls = append(calls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: arguments(tc.Function.Arguments)})
	}
	return p.answer(c.Model, choice.Message.Content, choice.Message.Refusal, calls, choice.FinishReason, usage(c.Usage), key)
}

// answer assembles a response from its parts, or fails with KindRefused
// when the model refused (a refusal text) or the content filter withheld
// the answer (finish_reason content_filter).
func (p *Provider) answer(model, text, refusal string, calls []llm.ToolCall, finish string, u llm.Usage, key string) (llm.Response, error) {
	if refusal != "" {
		return llm.Response{}, p.newError(llm.KindRefused, 0, refusal, nil, key)
	}
	if finish == "content_filter" {
		return llm.Response{}, p.newError(llm.KindRefused, 0, "the answer was withheld by the content filter", nil, key)
	}
	return llm.Response{Model: model, Text: text, ToolCalls: calls, StopReason: stopReason(finish, len(calls) > 0), Usage: u}, nil
}

// stopReason maps a finish_reason. The API says "stop" for a stop sequence
// too, so StopSequence is never reported. A "stop" with tool calls (some
// compatible servers) and an unknown or absent reason are read from the
// answer: tool calls mean StopToolUse.
func stopReason(finish string, hasCalls bool) llm.StopReason {
	switch {
	case finish == "length":
		return llm.StopMaxTokens
	case finish == "tool_calls" || finish == "function_call" || hasCalls:
		return llm.StopToolUse
	}
	return llm.StopEnd
}

// usage maps the API's counts. prompt_tokens includes the cached tokens
// and the tokens written to the cache (both are breakdowns of the prompt in
// prompt_tokens_details), so InputTokens is what is left after them.
func usage(u sdk.CompletionUsage) llm.Usage {
	read, write := u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens
	return llm.Usage{
		InputTokens:      max(u.PromptTokens-read-write, 0),
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	}
}

// arguments is a tool call's argument text as JSON. The model writes the
// text and it need not be JSON (a call cut off by max tokens is not): such
// text is kept as a JSON string, so the Response still marshals and the
// caller's schema check fails on it. Empty text is the empty object.
func arguments(text string) json.RawMessage {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	quoted, _ := json.Marshal(text) // a string always marshals
	return quoted
}

// streamAccumulator assembles a streamed answer from its chunks, passing
// each text and tool-argument fragment on as it comes.
type streamAccumulator struct {
	model    string
	text     strings.Builder
	refusal  strings.Builder
	calls    []llm.ToolCall
	args     []strings.Builder
	position map[int64]int // the API's tool-call index -> position in calls
	finish   string
	usage    llm.Usage
}

// add folds one chunk in. Only choice 0 counts; usage arrives on the last
// chunk (stream_options.include_usage), whose choices are empty.
func (a *streamAccumulator) add(c sdk.ChatCompletionChunk, sink func(llm.Delta)) {
	if c.Model != "" {
		a.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		a.usage = usage(c.Usage)
	}
	for _, choice := range c.Choices {
		if choice.Index != 0 {
			continue
		}
		d := choice.Delta
		if d.Content != "" {
			a.text.WriteString(d.Content)
			sink(llm.Delta{Text: d.Content})
		}
		a.refusal.WriteString(d.Refusal)
		for _, tc := range d.ToolCalls {
			a.addToolCall(tc, sink)
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
}

// addToolCall folds in one tool-call fragment: the first for an index
// carries its id and name (and is passed on even with no argument text,
// so the sink learns of the call); later ones carry argument text.
func (a *streamAccumulator) addToolCall(tc sdk.ChatCompletionChunkChoiceDeltaToolCall, sink func(llm.Delta)) {
	if a.position == nil {
		a.position = map[int64]int{}
	}
	i, seen := a.position[tc.Index]
	if !seen {
		i = len(a.calls)
		a.position[tc.Index] = i
		a.calls = append(a.calls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name})
		a.args = append(a.args, strings.Builder{})
		a.args[i].WriteString(tc.Function.Arguments)
		sink(llm.Delta{ToolIndex: i, ToolID: tc.ID, ToolName: tc.Function.Name, Arguments: tc.Function.Arguments})
		return
	}
	if a.calls[i].ID == "" {
		a.calls[i].ID = tc.ID
	}
	if a.calls[i].Name == "" {
		a.calls[i].Name = tc.Function.Name
	}
	if tc.Function.Arguments != "" {
		a.args[i].WriteString(tc.Function.Arguments)
		sink(llm.Delta{ToolIndex: i, Arguments: tc.Function.Arguments})
	}
}

// streamed is the assembled answer of a stream that ended without an
// error, answered with HTTP status. A stream that never said why it stopped (no finish_reason) was
// not the API's stream format, or was cut short: KindMalformed.
func (p *Provider) streamed(a *streamAccumulator, status int, key string) (llm.Response, error) {
	if a.finish == "" {
		return llm.Response{}, p.newError(llm.KindMalformed, status, "the stream ended without a finish_reason", nil, key)
	}
	for i := range a.calls {
		a.calls[i].Arguments = arguments(a.args[i].String())
	}
	return p.answer(a.model, a.text.String(), a.refusal.String(), a.calls, a.finish, a.usage, key)
}
