package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/openai"
)

// The wire shapes of a request, as the API documents them. Decoding
// refuses unknown members, so a parameter the provider should not send
// (max_tokens, n, a tool's strict) fails the test.
type (
	reqBody struct {
		Model               string          `json:"model"`
		Messages            []reqMessage    `json:"messages"`
		Tools               []reqTool       `json:"tools"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
		Temperature         *float64        `json:"temperature"`
		ResponseFormat      *reqFormat      `json:"response_format"`
		Stream              bool            `json:"stream"`
		StreamOptions       *reqStreamOpts  `json:"stream_options"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
	}
	reqMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []reqToolCall   `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	reqToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	reqTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	reqFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
	reqStreamOpts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	reqTextPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

// decodeRequest reads a chat completions request body back into the
// neutral form, checking what the provider must always send: a leading
// system message only, string arguments, a strict json_schema format, and
// include_usage on a stream. Tool results are grouped into one tool
// message per run, each named after the call it answers.
func decodeRequest(body io.Reader) (llmtest.Received, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var b reqBody
	if err := dec.Decode(&b); err != nil {
		return llmtest.Received{}, err
	}
	if b.Stream && (b.StreamOptions == nil || !b.StreamOptions.IncludeUsage) {
		return llmtest.Received{}, fmt.Errorf("a streamed request without stream_options.include_usage")
	}
	if !b.Stream && b.StreamOptions != nil {
		return llmtest.Received{}, fmt.Errorf("stream_options on a request that does not stream")
	}
	if len(b.ToolChoice) > 0 {
		return llmtest.Received{}, fmt.Errorf("tool_choice is sent, but the SPI has none")
	}
	req := llm.Request{Model: b.Model, MaxTokens: b.MaxCompletionTokens, Temperature: b.Temperature}
	names := map[string]string{} // tool call id -> name, for the results
	for i, m := range b.Messages {
		text, err := content(m.Content)
		if err != nil {
			return llmtest.Received{}, fmt.Errorf("message %d: %w", i, err)
		}
		switch m.Role {
		case "system", "developer":
			if i != 0 {
				return llmtest.Received{}, fmt.Errorf("message %d: a %s message after the first", i, m.Role)
			}
			req.System = text
		case "user":
			req.Messages = append(req.Messages, llm.UserText(text))
		case "assistant":
			msg := llm.Message{Role: llm.RoleAssistant, Text: text}
			for _, c := range m.ToolCalls {
				if c.Type != "function" {
					return llmtest.Received{}, fmt.Errorf("message %d: a tool call of type %q", i, c.Type)
				}
				names[c.ID] = c.Function.Name
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: arguments(c.Function.Arguments)})
			}
			req.Messages = append(req.Messages, msg)
		case "tool":
			if m.ToolCallID == "" {
				return llmtest.Received{}, fmt.Errorf("message %d: a tool message without tool_call_id", i)
			}
			req.Messages = appendResult(req.Messages, toolResult(m.ToolCallID, names[m.ToolCallID], text))
		default:
			return llmtest.Received{}, fmt.Errorf("message %d: role %q", i, m.Role)
		}
	}
	for _, t := range b.Tools {
		if t.Type != "function" {
			return llmtest.Received{}, fmt.Errorf("a tool of type %q", t.Type)
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	if f := b.ResponseFormat; f != nil {
		if f.Type != "json_schema" || !f.JSONSchema.Strict {
			return llmtest.Received{}, fmt.Errorf("response_format %q (strict %v), want a strict json_schema", f.Type, f.JSONSchema.Strict)
		}
		req.ResponseFormat = &llm.ResponseFormat{Name: f.JSONSchema.Name, Schema: f.JSONSchema.Schema}
	}
	return llmtest.Received{Request: req, Stream: b.Stream}, nil
}

// content is a message's content: a string, text parts, or null.
func content(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []reqTextPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("a content part of type %q", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// toolResult reads a tool message back: openai.ToolErrorPrefix marks a
// failed result.
func toolResult(callID, name, text string) llm.ToolResult {
	body, failed := strings.CutPrefix(text, openai.ToolErrorPrefix)
	return llm.ToolResult{CallID: callID, Name: name, Content: body, IsError: failed}
}

// appendResult adds a result to the tool message ending msgs, or starts one.
func appendResult(msgs []llm.Message, r llm.ToolResult) []llm.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleTool {
		msgs[n-1].ToolResults = append(msgs[n-1].ToolResults, r)
		return msgs
	}
	return append(msgs, llm.Message{Role: llm.RoleTool, ToolResults: []llm.ToolResult{r}})
}

// arguments is argument text as JSON, as the provider reads it back: text
// that is not JSON becomes a JSON string.
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

// Normalize maps a request to what the API's wire format carries back,
// for llmtest.Target.Normalize: a tool result's Name is not sent (the fake
// names it after the call with its id earlier in the conversation), a
// failed result travels as openai.ToolErrorPrefix on its content,
// consecutive tool messages arrive as one, fields a role cannot carry are
// dropped, absent tool-call arguments are {}, an unnamed response format
// is named openai.DefaultResponseFormatName, and a MaxTokens below 1 is
// not sent.
func Normalize(req llm.Request) llm.Request {
	out := req
	out.Messages = nil
	names := map[string]string{}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			out.Messages = append(out.Messages, llm.UserText(m.Text))
		case llm.RoleAssistant:
			msg := llm.Message{Role: llm.RoleAssistant, Text: m.Text}
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Name
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: arguments(string(c.Arguments))})
			}
			out.Messages = append(out.Messages, msg)
		case llm.RoleTool:
			for _, r := range m.ToolResults {
				text := r.Content
				if r.IsError {
					text = openai.ToolErrorPrefix + text
				}
				out.Messages = appendResult(out.Messages, toolResult(r.CallID, names[r.CallID], text))
			}
		default:
			out.Messages = append(out.Messages, m)
		}
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Name == "" {
		rf := *req.ResponseFormat
		rf.Name = openai.DefaultResponseFormatName
		out.ResponseFormat = &rf
	}
	if out.MaxTokens < 0 {
		out.MaxTokens = 0
	}
	return out
}
