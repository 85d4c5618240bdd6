package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"

	"github.com/loom-kernel/loom/llm"
)

// ToolErrorPrefix starts the content of a tool message whose result failed
// (ToolResult.IsError): Chat Completions has no error flag on a tool
// message, so the failure is said in the text the model reads.
const ToolErrorPrefix = "Error: "

// DefaultResponseFormatName names a JSON-schema response format whose
// llm.ResponseFormat.Name is empty: the API requires a name.
const DefaultResponseFormatName = "response"

// params translates a request into Chat Completions parameters. The system
// prompt is a leading system message; each tool result is its own tool
// message; structured output is a strict json_schema response format.
func (p *Provider) params(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{Model: req.Model}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msgs, err := messageParams(m)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, p.invalid(fmt.Sprintf("message %d: %v", i, err))
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fn := sdk.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		if len(t.InputSchema) > 0 {
			schema, err := schemaObject(t.InputSchema)
			if err != nil {
				return sdk.ChatCompletionNewParams{}, p.invalid(fmt.Sprintf("tool %q: input schema: %v", t.Name, err))
			}
			fn.Parameters = schema
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
	}
	if req.Temperature != nil {
		params.Temperature = sdk.Float(*req.Temperature)
	}
	if rf := req.ResponseFormat; rf != nil {
		if _, err := schemaObject(rf.Schema); err != nil {
			return sdk.ChatCompletionNewParams{}, p.invalid(fmt.Sprintf("response format schema: %v", err))
		}
		name := rf.Name
		if name == "" {
			name = DefaultResponseFormatName
		}
		params.ResponseFormat.OfJSONSchema = &sdk.ResponseFormatJSONSchemaParam{
			JSONSchema: sdk.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: name, Schema: json.RawMessage(rf.Schema), Strict: sdk.Bool(true),
			},
		}
	}
	return params, nil
}

// messageParams is one SPI message as Chat Completions messages: one for
// a user or assistant message, one per result for a tool message.
func messageParams(m llm.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.RoleUser:
		return []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage(m.Text)}, nil
	case llm.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		if m.Text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = sdk.String(m.Text)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: argumentsText(c.Arguments)},
				},
			})
		}
		return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	case llm.RoleTool:
		if len(m.ToolResults) == 0 {
			return nil, fmt.Errorf("a tool message has no results")
		}
		out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(m.ToolResults))
		for _, r := range m.ToolResults {
			content := r.Content
			if r.IsError {
				content = ToolErrorPrefix + content
			}
			out = append(out, sdk.ToolMessage(content, r.CallID))
		}
		return out, nil
	}
	return nil, fmt.Errorf("role %q is not one of user, assistant, tool", m.Role)
}

// argumentsText is a tool call's arguments as the API's JSON string;
// absent arguments are the empty object.
func argumentsText(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	return string(args)
}

// schemaObject splits a JSON Schema that must be an object into its
// members, each kept as the exact JSON it was (the SDK would turn a decoded
// json.Number into a string, and a float64 rounds big integers).
func schemaObject(raw json.RawMessage) (map[string]any, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	schema := make(map[string]any, len(members))
	for k, v := range members { //loom:order-independent each member on its own
		schema[k] = v
	}
	return schema, nil
}

// invalid is a request this provider refuses to send.
func (p *Provider) invalid(message string) error {
	return llm.NewError(p.name, llm.KindInvalidRequest, 0, message, nil)
}
