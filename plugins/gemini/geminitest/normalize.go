package geminitest

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/llm"
)

// Normalize maps a request the provider sends to what the Gemini wire
// carries back, for llmtest.Target.Normalize:
//
//   - a "models/" prefix on the model is the path's, not the name's;
//   - the temperature travels as a float32;
//   - a response format's name has no field (the schema alone is sent);
//   - empty tool-call arguments are the empty object;
//   - a tool result without a name takes its call's (the API needs one);
//   - a tool result's content that is a JSON object travels as that object
//     (printed back canonically; an object that is exactly {"output": v} or
//     {"error": v} reads back as v, the latter as a failed call), unless a
//     number in it would not survive a float64 — then, like any other
//     content, it travels as a string and comes back unchanged.
func Normalize(req llm.Request) llm.Request {
	req.Model = strings.TrimPrefix(req.Model, "models/")
	if t := req.Temperature; t != nil {
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(float32(*t)), 'g', -1, 32), 64)
		req.Temperature = &f
	}
	if rf := req.ResponseFormat; rf != nil {
		req.ResponseFormat = &llm.ResponseFormat{Schema: rf.Schema}
	}
	names := map[string]string{}
	msgs := make([]llm.Message, len(req.Messages))
	for i, m := range req.Messages {
		m.ToolCalls = append([]llm.ToolCall(nil), m.ToolCalls...)
		for j, c := range m.ToolCalls {
			names[c.ID] = c.Name
			if len(bytes.TrimSpace(c.Arguments)) == 0 {
				m.ToolCalls[j].Arguments = json.RawMessage(`{}`)
			}
		}
		m.ToolResults = append([]llm.ToolResult(nil), m.ToolResults...)
		for j, r := range m.ToolResults {
			if r.Name == "" {
				r.Name = names[r.CallID]
			}
			r.Content, r.IsError = carriedResult(r.Content, r.IsError)
			m.ToolResults[j] = r
		}
		msgs[i] = m
	}
	req.Messages = msgs
	return req
}

// carriedResult is what a tool result's content and error flag read back as.
func carriedResult(content string, isError bool) (string, bool) {
	if !losslessObject(content) {
		return content, isError
	}
	if isError {
		s, _ := canonical(json.RawMessage(content))
		return s, true
	}
	s, isErr, err := resultContent(json.RawMessage(content))
	if err != nil {
		return content, isError
	}
	return s, isErr
}

// losslessObject reports whether s is one JSON object whose numbers all
// keep their values through a float64.
func losslessObject(s string) bool {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return false
	}
	_, isObject := v.(map[string]any)
	return isObject && numbersSurvive(v)
}

func numbersSurvive(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(x.String(), 64)
		want, ok1 := new(big.Rat).SetString(x.String())
		got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return err == nil && ok1 && ok2 && want.Cmp(got) == 0
	case map[string]any:
		for _, e := range x { //loom:order-independent a conjunction over members
			if !numbersSurvive(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !numbersSurvive(e) {
				return false
			}
		}
	}
	return true
}
