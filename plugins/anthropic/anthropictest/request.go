package anthropictest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/llm"
)

// wireRequest is the body of POST /v1/messages, as the API reads it. It is
// decoded strictly: a member the API would refuse (an unknown one, or a
// sampling parameter such as temperature, which API version 2026-10-21
// refuses) fails the decode, as the API answers it with a 400.
type wireRequest struct {
	Model        string          `json:"model"`
	MaxTokens    *int            `json:"max_tokens"`
	System       json.RawMessage `json:"system"`
	Messages     []wireMessage   `json:"messages"`
	Tools        []wireTool      `json:"tools"`
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
	Stream bool `json:"stream"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is a string or an array of content blocks.
	Content json.RawMessage `json:"content"`
}

// wireBlock is an input content block: text, tool_use or tool_result.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	// Content is a tool result's: a string or an array of text blocks.
	Content json.RawMessage `json:"content,omitempty"`
	IsError *bool           `json:"is_error,omitempty"`
}

type wireTool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// decodeRequest reads a request body into the neutral form, checking what
// the API requires. A tool result's Name, which is not on the wire, is the
// name of the tool_use it answers.
func decodeRequest(body []byte) (llm.Request, bool, error) {
	var w wireRequest
	if err := strictDecode(body, &w); err != nil {
		return llm.Request{}, false, err
	}
	switch {
	case w.Model == "":
		return llm.Request{}, false, errors.New("model: Field required")
	case w.MaxTokens == nil:
		return llm.Request{}, false, errors.New("max_tokens: Field required")
	case len(w.Messages) == 0:
		return llm.Request{}, false, errors.New("messages: at least one message is required")
	}
	req := llm.Request{Model: w.Model, MaxTokens: *w.MaxTokens}
	system, err := texts(w.System)
	if err != nil {
		return llm.Request{}, false, fmt.Errorf("system: %w", err)
	}
	req.System = system
	names := map[string]string{} // tool_use id -> tool name
	for i, m := range w.Messages {
		msgs, err := decodeMessage(m, names)
		if err != nil {
			return llm.Request{}, false, fmt.Errorf("messages.%d: %w", i, err)
		}
		req.Messages = append(req.Messages, msgs...)
	}
	for i, t := range w.Tools {
		if (t.Type != "" && t.Type != "custom") || t.Name == "" || len(t.InputSchema) == 0 {
			return llm.Request{}, false, fmt.Errorf("tools.%d: a custom tool needs a name and an input_schema", i)
		}
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	if c := w.OutputConfig; c != nil && c.Format != nil {
		if c.Format.Type != "json_schema" || len(c.Format.Schema) == 0 {
			return llm.Request{}, false, errors.New("output_config.format: a json_schema format needs a schema")
		}
		req.ResponseFormat = &llm.ResponseFormat{Schema: c.Format.Schema}
	}
	return req, w.Stream, nil
}

// decodeMessage reads one turn: a user turn is a tool message (its
// tool_result blocks) and a user message (its text), in that order, each
// when present; an assistant turn is one assistant message.
func decodeMessage(m wireMessage, names map[string]string) ([]llm.Message, error) {
	blocks, err := contentBlocks(m.Content)
	if err != nil {
		return nil, err
	}
	switch m.Role {
	case "user":
		var text strings.Builder
		var results []llm.ToolResult
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_result":
				content, err := texts(b.Content)
				if err != nil {
					return nil, fmt.Errorf("tool_result %s: %w", b.ToolUseID, err)
				}
				results = append(results, llm.ToolResult{CallID: b.ToolUseID, Name: names[b.ToolUseID],
					Content: content, IsError: b.IsError != nil && *b.IsError})
			default:
				return nil, fmt.Errorf("a user turn has no %q blocks here", b.Type)
			}
		}
		var out []llm.Message
		if len(results) > 0 {
			out = append(out, llm.Message{Role: llm.RoleTool, ToolResults: results})
		}
		if text.Len() > 0 || len(results) == 0 {
			out = append(out, llm.Message{Role: llm.RoleUser, Text: text.String()})
		}
		return out, nil
	case "assistant":
		msg := llm.Message{Role: llm.RoleAssistant}
		var text strings.Builder
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				if b.ID == "" || b.Name == "" || len(b.Input) == 0 {
					return nil, errors.New("a tool_use block needs an id, a name and an input")
				}
				names[b.ID] = b.Name
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
			default:
				return nil, fmt.Errorf("an assistant turn has no %q blocks here", b.Type)
			}
		}
		msg.Text = text.String()
		return []llm.Message{msg}, nil
	}
	return nil, fmt.Errorf("role: %q is not user or assistant", m.Role)
}

// contentBlocks reads a content member: a string (one text block) or an
// array of blocks, whose text blocks the API wants non-empty.
func contentBlocks(raw json.RawMessage) ([]wireBlock, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []wireBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []wireBlock
	if err := strictDecode(raw, &blocks); err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	for _, b := range blocks {
		if b.Type == "text" && b.Text == "" {
			return nil, errors.New("text content blocks must be non-empty")
		}
	}
	return blocks, nil
}

// texts reads a member that is absent, a string, or an array of text
// blocks, as one string.
func texts(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	blocks, err := contentBlocks(raw)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, block := range blocks {
		if block.Type != "text" {
			return "", fmt.Errorf("a %q block where text blocks go", block.Type)
		}
		b.WriteString(block.Text)
	}
	return b.String(), nil
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
