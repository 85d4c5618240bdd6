package geminitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/llm"
)

// The Gemini REST shapes the fake reads and writes (generateContent's
// request and GenerateContentResponse), with JSON-valued members kept raw so
// a schema or an argument object is compared as the client sent it. The
// request is decoded strictly: a member the fake does not know fails the
// test, so the provider cannot send something unchecked.

type wireRequest struct {
	Contents          []wireContent     `json:"contents"`
	SystemInstruction *wireContent      `json:"systemInstruction,omitempty"`
	Tools             []wireTool        `json:"tools,omitempty"`
	GenerationConfig  *wireGenerationCf `json:"generationConfig,omitempty"`
}

type wireContent struct {
	Role  string     `json:"role,omitempty"`
	Parts []wirePart `json:"parts"`
}

type wirePart struct {
	Text             string                `json:"text,omitempty"`
	Thought          bool                  `json:"thought,omitempty"`
	ThoughtSignature string                `json:"thoughtSignature,omitempty"`
	FunctionCall     *wireFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *wireFunctionResponse `json:"functionResponse,omitempty"`
}

type wireFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type wireFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type wireTool struct {
	FunctionDeclarations []wireFunctionDeclaration `json:"functionDeclarations"`
}

type wireFunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type wireGenerationCf struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	MaxOutputTokens    int             `json:"maxOutputTokens,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
}

type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates,omitempty"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *wireUsage          `json:"usageMetadata,omitempty"`
	ModelVersion   string              `json:"modelVersion,omitempty"`
	ResponseID     string              `json:"responseId,omitempty"`
}

type wireCandidate struct {
	Content      *wireContent `json:"content,omitempty"`
	FinishReason string       `json:"finishReason,omitempty"`
	Index        int          `json:"index"`
}

type wirePromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type wireUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
}

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details,omitempty"`
}

// errMissingSignature is Gemini 3's refusal of a replayed function call
// without a thought signature, worded as the API words it.
//
//lint:ignore ST1005 the API's own message, verbatim
var errMissingSignature = errors.New("Function call is missing a thought_signature in functionCall parts. " +
	"This is required for tools to work correctly")

// decodeRequest reads a generateContent body into the neutral request.
func decodeRequest(body []byte, model string) (llm.Request, error) {
	var w wireRequest
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return llm.Request{}, fmt.Errorf("the body is not a generateContent request: %w", err)
	}
	req := llm.Request{Model: model}
	if w.SystemInstruction != nil {
		req.System = joinText(w.SystemInstruction.Parts)
	}
	for _, t := range w.Tools {
		for _, f := range t.FunctionDeclarations {
			req.Tools = append(req.Tools, llm.Tool{Name: f.Name, Description: f.Description, InputSchema: f.ParametersJSONSchema})
		}
	}
	if g := w.GenerationConfig; g != nil {
		req.MaxTokens, req.Temperature = g.MaxOutputTokens, g.Temperature
		if g.ResponseMimeType == "application/json" && len(g.ResponseJSONSchema) > 0 {
			req.ResponseFormat = &llm.ResponseFormat{Schema: g.ResponseJSONSchema}
		}
	}
	for i, c := range w.Contents {
		m, err := decodeContent(c)
		if err != nil {
			return llm.Request{}, fmt.Errorf("contents[%d]: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}

// decodeContent reads one turn: a model turn is an assistant message, a user
// turn of functionResponse parts a tool message, any other user turn a user
// message.
func decodeContent(c wireContent) (llm.Message, error) {
	switch c.Role {
	case "model":
		m := llm.Message{Role: llm.RoleAssistant, Text: joinText(c.Parts)}
		for _, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if len(m.ToolCalls) == 0 && p.ThoughtSignature == "" {
				return llm.Message{}, errMissingSignature
			}
			args := p.FunctionCall.Args
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Arguments: args})
		}
		return m, nil
	case "user", "":
		var results []llm.ToolResult
		for _, p := range c.Parts {
			if r := p.FunctionResponse; r != nil {
				content, isError, err := resultContent(r.Response)
				if err != nil {
					return llm.Message{}, err
				}
				results = append(results, llm.ToolResult{CallID: r.ID, Name: r.Name, Content: content, IsError: isError})
			}
		}
		if results == nil {
			return llm.UserText(joinText(c.Parts)), nil
		}
		if len(results) != len(c.Parts) {
			return llm.Message{}, errors.New("a user turn mixes functionResponse parts with others")
		}
		return llm.Message{Role: llm.RoleTool, ToolResults: results}, nil
	}
	return llm.Message{}, fmt.Errorf("unknown role %q", c.Role)
}

// resultContent reads a functionResponse's response object back into a tool
// result: {"error": v} is a failed call's v, {"output": v} a call's v, and
// any other object is the content itself, printed canonically.
func resultContent(raw json.RawMessage) (string, bool, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return "", false, errors.New("a functionResponse's response is not an object")
	}
	if len(members) == 1 {
		if v, ok := members["error"]; ok {
			s, err := valueText(v)
			return s, true, err
		}
		if v, ok := members["output"]; ok {
			s, err := valueText(v)
			return s, false, err
		}
	}
	s, err := canonical(raw)
	return s, false, err
}

// valueText is a JSON string's text, or any other value printed canonically.
func valueText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	return canonical(raw)
}

// canonical prints a JSON value as encoding/json prints what it parsed:
// sorted members, float64 numbers.
func canonical(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func joinText(parts []wirePart) string {
	var b strings.Builder
	for _, p := range parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
