package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/loom-kernel/loom/llm"
)

// emptySchema is the input schema of a tool declared without one: a tool
// that takes no arguments (the API requires a schema on every tool).
const emptySchema = `{"type":"object"}`

// params translates a neutral request into the Messages API's:
//
//   - System is the system parameter, one text block;
//   - a user message is a user turn with one text block;
//   - an assistant message is an assistant turn: its text block, then one
//     tool_use block per call (id, name and arguments kept);
//   - a tool message is a user turn of tool_result blocks (is_error sent
//     only when set; the result's Name is not on the wire, the tool_use_id
//     pairs it with its call);
//   - Tools are custom tools, their schemas sent byte for byte;
//   - ResponseFormat is output_config.format, the API's JSON-schema
//     structured output (it has no name: ResponseFormat.Name is not sent);
//   - MaxTokens 0 is llm.DefaultMaxTokens, the API requiring one;
//   - Temperature is not sent (API version 2026-10-21 refuses it).
//
// What cannot be sent as given is a KindInvalidRequest error.
func (p *Provider) params(req llm.Request) (sdk.MessageNewParams, error) {
	out := sdk.MessageNewParams{Model: sdk.Model(req.Model), MaxTokens: int64(req.MaxTokens)}
	if out.MaxTokens == 0 {
		out.MaxTokens = llm.DefaultMaxTokens
	}
	if req.System != "" {
		out.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		msg, err := message(m)
		if err != nil {
			return sdk.MessageNewParams{}, p.invalid(fmt.Sprintf("message %d: %v", i, err))
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range req.Tools {
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(emptySchema)
		}
		if !isObject(schema) {
			return sdk.MessageNewParams{}, p.invalid(fmt.Sprintf("tool %q: the input schema is not a JSON object", t.Name))
		}
		tool := &sdk.ToolParam{Name: t.Name, InputSchema: param.Override[sdk.ToolInputSchemaParam](schema)}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		out.Tools = append(out.Tools, sdk.ToolUnionParam{OfTool: tool})
	}
	if f := req.ResponseFormat; f != nil {
		schema, err := schemaMap(f.Schema)
		if err != nil {
			return sdk.MessageNewParams{}, p.invalid(fmt.Sprintf("response format %q: the schema is not a JSON object", f.Name))
		}
		out.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
	}
	return out, nil
}

func (p *Provider) invalid(message string) error {
	return llm.NewError(p.name, llm.KindInvalidRequest, 0, message, nil)
}

// message translates one conversation entry (see params).
func message(m llm.Message) (sdk.MessageParam, error) {
	switch m.Role {
	case llm.RoleUser:
		if len(m.ToolCalls) > 0 || len(m.ToolResults) > 0 {
			return sdk.MessageParam{}, fmt.Errorf("a user message carries no tool calls or results (results are a %q message)", llm.RoleTool)
		}
		return sdk.NewUserMessage(sdk.NewTextBlock(m.Text)), nil
	case llm.RoleAssistant:
		if len(m.ToolResults) > 0 {
			return sdk.MessageParam{}, fmt.Errorf("an assistant message carries no tool results")
		}
		var blocks []sdk.ContentBlockParamUnion
		if m.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Text))
		}
		for _, c := range m.ToolCalls {
			args := c.Arguments
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage(`{}`)
			}
			if !json.Valid(args) {
				return sdk.MessageParam{}, fmt.Errorf("tool call %q: the arguments are not JSON", c.ID)
			}
			blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args, c.Name))
		}
		return sdk.NewAssistantMessage(blocks...), nil
	case llm.RoleTool:
		if len(m.ToolCalls) > 0 || m.Text != "" {
			return sdk.MessageParam{}, fmt.Errorf("a tool message carries only tool results")
		}
		blocks := make([]sdk.ContentBlockParamUnion, 0, len(m.ToolResults))
		for _, r := range m.ToolResults {
			result := &sdk.ToolResultBlockParam{ToolUseID: r.CallID}
			if r.Content != "" {
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Content}}}
			}
			if r.IsError {
				result.IsError = sdk.Bool(true)
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: result})
		}
		return sdk.NewUserMessage(blocks...), nil
	}
	return sdk.MessageParam{}, fmt.Errorf("unknown role %q", m.Role)
}

func isObject(raw json.RawMessage) bool {
	var members map[string]json.RawMessage
	return json.Unmarshal(raw, &members) == nil && members != nil
}

// schemaMap decodes a JSON-Schema object keeping its numbers as written.
func schemaMap(raw json.RawMessage) (map[string]any, error) {
	if !isObject(raw) {
		return nil, fmt.Errorf("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var schema map[string]any
	err := dec.Decode(&schema)
	return schema, err
}
