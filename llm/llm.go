package llm

import (
	"context"
	"encoding/json"
	"time"
)

// SPIVersion is the version of the provider SPI this package defines
// (semver): a provider built for another major version must not be used.
// 1.0.0 is Provider, Request, Response, Delta and Error as declared here.
const SPIVersion = "1.0.0"

// Provider is one model API behind the provider-neutral SPI. An
// implementation translates a Request into its API's wire format, sends it
// once (no hidden retries: a retry is the caller's, recorded in the log),
// and translates the answer back.
//
// Complete returns the model's whole answer. With a non-nil sink the call
// streams: the provider passes each text or tool-argument fragment to sink
// as it arrives, on the calling goroutine, and still returns the whole
// answer assembled from them. Deltas are live-only: nothing durable ever
// records one; the recorded value of a call is its Response (ADR 0119).
//
// Failures are *Error with a Kind; a cancelled ctx returns an error that
// satisfies errors.Is(err, ctx.Err()). Neither an error nor a Response may
// contain the API key.
type Provider interface {
	// Name is the provider's stable name (anthropic, openai, gemini,
	// cassette…): part of the recorded tool id and of the price table's key.
	Name() string
	Complete(ctx context.Context, req Request, sink func(Delta)) (Response, error)
}

// Role is who a Message is from.
type Role string

// The roles of a conversation. The system prompt is Request.System, not a
// message.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool carries the results of the tool calls of the assistant
	// message before it.
	RoleTool Role = "tool"
)

// Message is one entry of a conversation: a user's text, an assistant's
// text and tool calls, or the results of those calls.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []ToolResult `json:"toolResults,omitempty"`
}

// UserText is a user message holding text.
func UserText(text string) Message { return Message{Role: RoleUser, Text: text} }

// Tool is a function the model may call: its name, what it is for, and the
// JSON Schema of its arguments (an object schema).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolCall is the model's request to call a tool. ID pairs it with its
// ToolResult; Arguments is the JSON the model wrote, which need not match
// the tool's schema (the caller checks it).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult answers one ToolCall: its content (text, usually JSON) and
// whether the call failed.
type ToolResult struct {
	CallID  string `json:"callId"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}

// ResponseFormat asks for structured output: a JSON answer that satisfies
// Schema, returned as Response.Text.
type ResponseFormat struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// Request is one model call. Its JSON form (member names and order as
// declared) is what its digest is taken over.
type Request struct {
	Model    string    `json:"model"`
	System   string    `json:"system,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// MaxTokens bounds the answer; 0 is the provider's default
	// (DefaultMaxTokens for APIs that need one).
	MaxTokens   int      `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	// ResponseFormat, when set, asks for structured output.
	ResponseFormat *ResponseFormat `json:"responseFormat,omitempty"`
}

// DefaultMaxTokens is the answer bound a provider sends when the API needs
// one and Request.MaxTokens is 0.
const DefaultMaxTokens = 4096

// StopReason is why the model stopped.
type StopReason string

// The stop reasons every provider maps its own onto. A refusal is not a
// stop reason but an *Error of KindRefused.
const (
	StopEnd       StopReason = "end"
	StopToolUse   StopReason = "toolUse"
	StopMaxTokens StopReason = "maxTokens"
	StopSequence  StopReason = "stopSequence"
)

// Usage is what a call consumed, in tokens, as the provider reported it.
type Usage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
}

// Total is every token the call was billed for.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Response is a model's answer: text, tool calls, or both.
type Response struct {
	// Model is the model that answered, as the API named it.
	Model      string     `json:"model"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	StopReason StopReason `json:"stopReason"`
	Usage      Usage      `json:"usage"`
}

// Message is the response as the assistant message that continues the
// conversation.
func (r Response) Message() Message {
	return Message{Role: RoleAssistant, Text: r.Text, ToolCalls: r.ToolCalls}
}

// Delta is one streamed fragment: text, or part of the arguments of the
// tool call at ToolIndex (whose ID and Name come with its first fragment).
type Delta struct {
	Text      string `json:"text,omitempty"`
	ToolIndex int    `json:"toolIndex,omitempty"`
	ToolID    string `json:"toolId,omitempty"`
	ToolName  string `json:"toolName,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// retryAfterCap bounds a Retry-After hint a provider honours: a server
// cannot make a step wait longer than this per attempt.
const retryAfterCap = 5 * time.Minute
