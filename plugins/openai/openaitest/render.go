package openaitest

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// created is every answer's timestamp: the fake reads no clock.
const created = 1735689600

// The fragment counts a streamed answer is split into.
const (
	textFragments     = 4
	argumentFragments = 3
)

// The wire shapes of an answer, as api.openai.com sends them (field order
// included). Pointers are the API's nullable fields.
type (
	apiError struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	}
	wireCompletion struct {
		ID                string       `json:"id"`
		Object            string       `json:"object"`
		Created           int64        `json:"created"`
		Model             string       `json:"model"`
		Choices           []wireChoice `json:"choices"`
		Usage             *wireUsage   `json:"usage"`
		ServiceTier       string       `json:"service_tier"`
		SystemFingerprint string       `json:"system_fingerprint"`
	}
	wireChoice struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		Logprobs     *struct{}   `json:"logprobs"`
		FinishReason string      `json:"finish_reason"`
	}
	wireMessage struct {
		Role        string         `json:"role"`
		Content     *string        `json:"content"`
		Refusal     *string        `json:"refusal"`
		ToolCalls   []wireToolCall `json:"tool_calls,omitempty"`
		Annotations []struct{}     `json:"annotations"`
	}
	wireToolCall struct {
		Index    *int         `json:"index,omitempty"` // chunks only
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	wireChunk struct {
		ID                string            `json:"id"`
		Object            string            `json:"object"`
		Created           int64             `json:"created"`
		Model             string            `json:"model"`
		ServiceTier       string            `json:"service_tier"`
		SystemFingerprint string            `json:"system_fingerprint"`
		Choices           []wireChunkChoice `json:"choices"`
		Usage             *wireUsage        `json:"usage"`
	}
	wireChunkChoice struct {
		Index        int       `json:"index"`
		Delta        wireDelta `json:"delta"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason *string   `json:"finish_reason"`
	}
	wireDelta struct {
		Role      string         `json:"role,omitempty"`
		Content   *string        `json:"content,omitempty"`
		Refusal   *string        `json:"refusal,omitempty"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireUsage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		TotalTokens         int64 `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens     int64 `json:"cached_tokens"`
			CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
			AudioTokens      int64 `json:"audio_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens          int64 `json:"reasoning_tokens"`
			AudioTokens              int64 `json:"audio_tokens"`
			AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
			RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	}
)

// completion is a response as a chat.completion object.
func completion(id string, r llm.Response) wireCompletion {
	msg := wireMessage{Role: "assistant", Annotations: []struct{}{}}
	if r.Text != "" || len(r.ToolCalls) == 0 {
		msg.Content = &r.Text
	}
	for _, c := range r.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: c.ID, Type: "function",
			Function: wireFunction{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	return wireCompletion{ID: id, Object: "chat.completion", Created: created, Model: r.Model,
		Choices: []wireChoice{{Message: msg, FinishReason: finishReason(r.StopReason)}},
		Usage:   usage(r.Usage), ServiceTier: "default", SystemFingerprint: "fp_fake"}
}

// finishReason is a stop reason as the API says it.
func finishReason(s llm.StopReason) string {
	switch s {
	case llm.StopToolUse:
		return "tool_calls"
	case llm.StopMaxTokens:
		return "length"
	}
	return "stop" // StopEnd, and StopSequence, which the API does not tell apart
}

// usage is the API's counts: prompt_tokens includes the cache reads and
// writes its details break out.
func usage(u llm.Usage) *wireUsage {
	w := &wireUsage{PromptTokens: u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens, CompletionTokens: u.OutputTokens}
	w.TotalTokens = w.PromptTokens + w.CompletionTokens
	w.PromptTokensDetails.CachedTokens = u.CacheReadTokens
	w.PromptTokensDetails.CacheWriteTokens = u.CacheWriteTokens
	return w
}

// chunkWriter writes one streamed answer's chunks as server-sent events.
type chunkWriter struct {
	w     http.ResponseWriter
	id    string
	model string
}

func newChunkWriter(w http.ResponseWriter, id, model string) *chunkWriter {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &chunkWriter{w: w, id: id, model: model}
}

// choice sends one chunk for choice 0 (finish is nil but on the last).
func (c *chunkWriter) choice(d wireDelta, finish *string) {
	c.send(wireChunk{Choices: []wireChunkChoice{{Delta: d, FinishReason: finish}}})
}

func (c *chunkWriter) send(chunk wireChunk) {
	chunk.ID, chunk.Object, chunk.Created, chunk.Model = c.id, "chat.completion.chunk", created, c.model
	chunk.ServiceTier, chunk.SystemFingerprint = "default", "fp_fake"
	raw, _ := json.Marshal(chunk) // plain structs always marshal
	c.event(string(raw))
}

func (c *chunkWriter) event(data string) {
	_, _ = c.w.Write([]byte("data: " + data + "\n\n"))
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// end sends the usage chunk (choices empty, as with include_usage) and
// the [DONE] sentinel.
func (c *chunkWriter) end(u llm.Usage) {
	c.send(wireChunk{Choices: []wireChunkChoice{}, Usage: usage(u)})
	c.event("[DONE]")
}

// stream sends a response as chunks: the role, the text in fragments, each
// tool call (id and name first, then its arguments in fragments), the
// finish reason, usage. A Hang reply stops after the first text fragment
// and holds the stream open until the client goes away.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, id string, reply llmtest.Reply) {
	r := reply.Response
	c := newChunkWriter(w, id, r.Model)
	empty := ""
	c.choice(wireDelta{Role: "assistant", Content: &empty}, nil)
	if r.Text != "" {
		for _, piece := range llmtest.Chunks(r.Text, textFragments) {
			c.choice(wireDelta{Content: &piece}, nil)
			if reply.Hang {
				s.hang(ctx)
				return
			}
		}
	}
	for i, call := range r.ToolCalls {
		c.choice(wireDelta{ToolCalls: []wireToolCall{{Index: &i, ID: call.ID, Type: "function",
			Function: wireFunction{Name: call.Name}}}}, nil)
		for _, piece := range llmtest.Chunks(string(call.Arguments), argumentFragments) {
			c.choice(wireDelta{ToolCalls: []wireToolCall{{Index: &i, Function: wireFunction{Arguments: piece}}}}, nil)
		}
	}
	finish := finishReason(r.StopReason)
	c.choice(wireDelta{}, &finish)
	c.end(r.Usage)
}

// streamRefusal streams a refusal: its text in delta.refusal fragments.
func (s *Server) streamRefusal(w http.ResponseWriter, id string, r llm.Response, refusal string) {
	c := newChunkWriter(w, id, r.Model)
	empty := ""
	c.choice(wireDelta{Role: "assistant", Refusal: &empty}, nil)
	for _, piece := range llmtest.Chunks(refusal, textFragments) {
		c.choice(wireDelta{Refusal: &piece}, nil)
	}
	finish := finishReason(r.StopReason)
	c.choice(wireDelta{}, &finish)
	c.end(r.Usage)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client may be gone: nothing to do
}

// writeError is the API's error body, {"error": {...}}. A nil param or
// code is JSON null, as the API sends it.
func writeError(w http.ResponseWriter, status int, e apiError) {
	if e.Param == "" {
		e.Param = nil
	}
	if e.Code == "" {
		e.Code = nil
	}
	writeJSON(w, status, map[string]apiError{"error": e})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
