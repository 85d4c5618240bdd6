package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"google.golang.org/genai"

	"github.com/loom-kernel/loom/llm"
)

// skipSignature is the thought signature Google documents for a function
// call whose real signature is not at hand. Gemini 3 models reject a
// replayed functionCall part without one (HTTP 400), and the SPI's ToolCall
// has no field to carry the real one back, so every replayed call gets this.
var skipSignature = []byte("skip_thought_signature_validator")

// Keys of a functionResponse's response object: the API reads "output" as
// the function's output and "error" as its failure.
const (
	outputKey = "output"
	errorKey  = "error"
)

// buildRequest translates req into the SDK's contents and config: the system
// prompt as systemInstruction, assistant turns as role "model" (text, then
// functionCall parts), tool results as functionResponse parts of a user
// turn, tools as functionDeclarations with parametersJsonSchema, structured
// output as responseMimeType application/json with responseJsonSchema.
// Automatic continuation is off: a Complete is exactly one request.
func buildRequest(req llm.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	if req.Model == "" {
		return nil, nil, errors.New("the request names no model")
	}
	if req.MaxTokens < 0 || req.MaxTokens > math.MaxInt32 {
		return nil, nil, fmt.Errorf("MaxTokens %d is out of range", req.MaxTokens)
	}
	contents, err := buildContents(req.Messages)
	if err != nil {
		return nil, nil, err
	}
	config := &genai.GenerateContentConfig{
		AutomaticContinuation: genai.Ptr(false),
		MaxOutputTokens:       int32(req.MaxTokens),
	}
	if req.System != "" {
		config.SystemInstruction = &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: req.System}}}
	}
	if req.Temperature != nil {
		config.Temperature = genai.Ptr(float32(*req.Temperature))
	}
	if len(req.Tools) > 0 {
		decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
		for _, t := range req.Tools {
			if !json.Valid(t.InputSchema) {
				return nil, nil, fmt.Errorf("tool %q: its input schema is not JSON", t.Name)
			}
			decls = append(decls, &genai.FunctionDeclaration{Name: t.Name, Description: t.Description,
				ParametersJsonSchema: t.InputSchema})
		}
		config.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	}
	if rf := req.ResponseFormat; rf != nil {
		if !json.Valid(rf.Schema) {
			return nil, nil, fmt.Errorf("response format %q: its schema is not JSON", rf.Name)
		}
		config.ResponseMIMEType = "application/json"
		config.ResponseJsonSchema = rf.Schema
	}
	return contents, config, nil
}

// buildContents translates the conversation. A tool result with no Name
// takes the name of the call it answers (the API requires one).
func buildContents(msgs []llm.Message) ([]*genai.Content, error) {
	names := map[string]string{}
	out := make([]*genai.Content, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			out = append(out, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: m.Text}}})
		case llm.RoleAssistant:
			c := &genai.Content{Role: genai.RoleModel}
			if m.Text != "" {
				c.Parts = append(c.Parts, &genai.Part{Text: m.Text})
			}
			for _, call := range m.ToolCalls {
				args, err := callArgs(call.Arguments)
				if err != nil {
					return nil, fmt.Errorf("message %d: tool call %q: %w", i, call.ID, err)
				}
				names[call.ID] = call.Name
				c.Parts = append(c.Parts, &genai.Part{ThoughtSignature: skipSignature,
					FunctionCall: &genai.FunctionCall{ID: call.ID, Name: call.Name, Args: args}})
			}
			out = append(out, c)
		case llm.RoleTool:
			c := &genai.Content{Role: genai.RoleUser}
			for _, r := range m.ToolResults {
				name := r.Name
				if name == "" {
					name = names[r.CallID]
				}
				c.Parts = append(c.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
					ID: r.CallID, Name: name, Response: resultObject(r.Content, r.IsError)}})
			}
			out = append(out, c)
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// callArgs is a tool call's arguments as the API's args object. Empty
// arguments are an empty object; anything but a JSON object is refused (the
// wire carries an object only).
func callArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errors.New("its arguments are not a JSON object")
	}
	return args, nil
}

// resultObject is a tool result as a functionResponse's response object:
// the content itself when it is a JSON object the SDK carries losslessly,
// else {"output": content}; a failed call's is {"error": …} around the same
// value.
func resultObject(content string, isError bool) map[string]any {
	var value any = content
	if obj, ok := losslessObject(content); ok {
		if !isError {
			return obj
		}
		value = obj
	}
	if isError {
		return map[string]any{errorKey: value}
	}
	return map[string]any{outputKey: value}
}

// losslessObject parses s as a JSON object whose numbers survive the SDK's
// float64 round trip with their values intact (a large integer id would
// not: such content is sent as a string).
func losslessObject(s string) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	if _, ok := v.(map[string]any); !ok || !numbersSurvive(v) {
		return nil, false
	}
	var obj map[string]any
	if json.Unmarshal([]byte(s), &obj) != nil {
		return nil, false
	}
	return obj, true
}

// numbersSurvive reports whether every number in v keeps its value when
// parsed to a float64 and printed back.
func numbersSurvive(v any) bool {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil {
			return false
		}
		want, ok1 := new(big.Rat).SetString(x.String())
		got, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return ok1 && ok2 && want.Cmp(got) == 0
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
