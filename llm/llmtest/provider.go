package llmtest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/loom-kernel/loom/llm"
)

// Provider is an in-process llm.Provider answering from a Script, for unit
// tests of flows and agents that need no wire format: each Complete takes
// the next Reply (a Fail kind becomes the *llm.Error a real provider would
// return) and records the request. Tests of a provider's own translation
// use its fake server and RunProvider instead.
type Provider struct {
	*Script
	name string
}

// NewProvider returns a scripted provider named name.
func NewProvider(t testing.TB, name string) *Provider {
	return &Provider{Script: NewScript(t), name: name}
}

// Name implements llm.Provider.
func (p *Provider) Name() string { return p.name }

// Complete implements llm.Provider.
func (p *Provider) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	r, ok := p.Next(Received{Request: req, Stream: sink != nil})
	if !ok {
		return llm.Response{}, llm.NewError(p.name, llm.KindUnavailable, 500, "no scripted reply", nil)
	}
	if r.Fail != "" {
		e := llm.NewError(p.name, r.Fail, failStatus(r.Fail), r.Message, nil)
		e.RetryAfter = llm.ParseRetryAfter(r.RetryAfter, time.Time{}) // seconds; a date is not scripted here
		return llm.Response{}, e
	}
	if sink != nil {
		for _, piece := range Chunks(r.Response.Text, 3) {
			if piece != "" {
				sink(llm.Delta{Text: piece})
			}
		}
		for i, tc := range r.Response.ToolCalls {
			args := string(tc.Arguments)
			sink(llm.Delta{ToolIndex: i, ToolID: tc.ID, ToolName: tc.Name, Arguments: args[:len(args)/2]})
			sink(llm.Delta{ToolIndex: i, Arguments: args[len(args)/2:]})
		}
	}
	resp := r.Response
	if resp.Model == "" {
		resp.Model = req.Model
	}
	resp.ToolCalls = append([]llm.ToolCall(nil), resp.ToolCalls...)
	return resp, nil
}

func failStatus(k llm.Kind) int {
	switch k {
	case llm.KindRateLimited:
		return 429
	case llm.KindUnavailable:
		return 503
	case llm.KindInvalidRequest, llm.KindContextOverflow:
		return 400
	case llm.KindUnauthorized:
		return 401
	}
	return 200
}

// Text is a Reply answering text, with usage in and out tokens.
func Text(text string, in, out int64) Reply {
	return Reply{Response: llm.Response{Text: text, StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: in, OutputTokens: out}}}
}

// Calls is a Reply asking for tool calls, given as name and JSON arguments
// pairs; their ids are call_<n> in order.
func Calls(in, out int64, nameArgs ...string) Reply {
	r := Reply{Response: llm.Response{StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: in, OutputTokens: out}}}
	for i := 0; i+1 < len(nameArgs); i += 2 {
		r.Response.ToolCalls = append(r.Response.ToolCalls, llm.ToolCall{
			ID: "call_" + strconv.Itoa(len(r.Response.ToolCalls)), Name: nameArgs[i], Arguments: []byte(nameArgs[i+1])})
	}
	return r
}
