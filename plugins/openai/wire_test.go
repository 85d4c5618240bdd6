package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/plugins/openai"
)

// These tests answer with literal bodies in the shapes the API documents,
// independent of openaitest (whose renderer mirrors the provider's reader).

// literal is a provider aimed at a handler that answers every request with
// status, headers and body; *bodies collects what it was sent.
func literal(t *testing.T, status int, headers map[string]string, body string) (*openai.Provider, *[]string) {
	t.Helper()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Options{Credential: llm.Credential{Key: "sk-literal"}, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, &bodies
}

var jsonHeader = map[string]string{"Content-Type": "application/json"}
var sseHeader = map[string]string{"Content-Type": "text/event-stream"}

func failure(t *testing.T, err error, kind llm.Kind) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("Complete = %v, want an *llm.Error of kind %s", err, kind)
	}
	if e.Kind != kind {
		t.Fatalf("kind = %s, want %s (%v)", e.Kind, kind, err)
	}
	return e
}

func TestDocumentedCompletion(t *testing.T) {
	p, _ := literal(t, 200, jsonHeader, `{
  "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1741570283, "model": "gpt-4o-2024-08-06",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
    "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}},
                   {"id": "call_def", "type": "function", "function": {"name": "get_time", "arguments": ""}}],
    "annotations": []}, "logprobs": null, "finish_reason": "tool_calls"}],
  "usage": {"prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
  "service_tier": "default", "system_fingerprint": "fp_fc9f1d7035"}`)
	got, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Model != "gpt-4o-2024-08-06" || got.StopReason != llm.StopToolUse || got.Text != "" ||
		got.Usage != (llm.Usage{InputTokens: 93, OutputTokens: 46, CacheReadTokens: 1024}) {
		t.Errorf("response = %+v", got)
	}
	if len(got.ToolCalls) != 2 || got.ToolCalls[0].ID != "call_abc" || string(got.ToolCalls[0].Arguments) != `{"location":"Paris"}` ||
		string(got.ToolCalls[1].Arguments) != `{}` {
		t.Errorf("tool calls = %+v, want both in order, empty arguments as {}", got.ToolCalls)
	}
}

func TestDocumentedStream(t *testing.T) {
	chunk := func(choices, usage string) string {
		return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":` +
			choices + `,"usage":` + usage + "}\n\n"
	}
	body := chunk(`[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{"content":"lo."},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"logprobs":null,"finish_reason":null}]`, "null") +
		chunk(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]`, "null") +
		chunk(`[]`, `{"prompt_tokens":50,"completion_tokens":7,"total_tokens":57,"prompt_tokens_details":{"cached_tokens":10,"audio_tokens":0}}`) +
		"data: [DONE]\n\n"
	p, bodies := literal(t, 200, sseHeader, body)
	var deltas []llm.Delta
	got, err := p.Complete(context.Background(), hello(), func(d llm.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Text != "Hello." || got.StopReason != llm.StopToolUse || len(got.ToolCalls) != 1 ||
		string(got.ToolCalls[0].Arguments) != `{"a":1}` || got.Usage != (llm.Usage{InputTokens: 40, OutputTokens: 7, CacheReadTokens: 10}) {
		t.Errorf("response = %+v", got)
	}
	want := []llm.Delta{{Text: "Hel"}, {Text: "lo."}, {ToolID: "call_x", ToolName: "f"}, {Arguments: `{"a"`}, {Arguments: ":1}"}}
	if len(deltas) != len(want) {
		t.Fatalf("deltas = %+v, want %+v", deltas, want)
	}
	for i := range want {
		if deltas[i] != want[i] {
			t.Errorf("delta %d = %+v, want %+v", i, deltas[i], want[i])
		}
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte((*bodies)[0]), &sent); err != nil || sent["stream"] != true ||
		sent["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("the streamed request = %s, want stream and stream_options.include_usage", (*bodies)[0])
	}
}

func TestContentFilterIsRefused(t *testing.T) {
	p, _ := literal(t, 200, jsonHeader, `{"id":"c","object":"chat.completion","created":1,"model":"m",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":"content_filter"}]}`)
	_, err := p.Complete(context.Background(), hello(), nil)
	failure(t, err, llm.KindRefused)
}

func TestTruncatedToolArgumentsStayRecordable(t *testing.T) {
	p, _ := literal(t, 200, jsonHeader, `{"id":"c","object":"chat.completion","created":1,"model":"m",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,
"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"service\":\"chec"}}]},"finish_reason":"length"}]}`)
	got, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.StopReason != llm.StopMaxTokens {
		t.Errorf("stop reason = %s, want maxTokens", got.StopReason)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatalf("the response does not marshal (it is recorded): %v", err)
	}
	var text string
	if err := json.Unmarshal(got.ToolCalls[0].Arguments, &text); err != nil || text != `{"service":"chec` {
		t.Errorf("arguments = %s, want the model's text as a JSON string", got.ToolCalls[0].Arguments)
	}
}

func TestCompatibleServerErrors(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		headers map[string]string
		body    string
		kind    llm.Kind
		message string
		retry   time.Duration
	}{
		{"vLLMContextOverflow", 400, jsonHeader,
			`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			llm.KindContextOverflow, "maximum context length is 4096", 0},
		{"AzureContentFilter", 400, jsonHeader,
			`{"error":{"message":"The response was filtered due to the prompt triggering content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}`,
			llm.KindRefused, "content management policy", 0},
		{"RetryAfterMs", 429, map[string]string{"Content-Type": "application/json", "Retry-After-Ms": "1500", "Retry-After": "2"},
			`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			llm.KindRateLimited, "Rate limit reached", 1500 * time.Millisecond},
		{"RetryAfterMsInfinite", 429, map[string]string{"Content-Type": "application/json", "Retry-After-Ms": "+Inf"},
			`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			llm.KindRateLimited, "Rate limit reached", 5 * time.Minute},
		{"ProxyPage502", 502, map[string]string{"Content-Type": "text/html"}, `<html>Bad Gateway</html>`,
			llm.KindUnavailable, "Bad Gateway", 0},
		{"NotFound", 404, jsonHeader,
			`{"error":{"message":"The model 'gpt-nope' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			llm.KindInvalidRequest, "does not exist", 0},
		{"Forbidden", 403, jsonHeader,
			`{"error":{"message":"Project does not have access to model","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			llm.KindUnauthorized, "does not have access", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, bodies := literal(t, c.status, c.headers, c.body)
			_, err := p.Complete(context.Background(), hello(), nil)
			e := failure(t, err, c.kind)
			if e.Status != c.status || !strings.Contains(e.Message, c.message) || e.RetryAfter != c.retry {
				t.Errorf("error = %+v, want status %d, message with %q, retry after %v", e, c.status, c.message, c.retry)
			}
			if len(*bodies) != 1 {
				t.Errorf("the server got %d requests, want 1", len(*bodies))
			}
		})
	}
}

func TestErrorEventInStream(t *testing.T) {
	p, _ := literal(t, 200, sseHeader,
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`+"\n\n"+
			`data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`+"\n\n")
	_, err := p.Complete(context.Background(), hello(), func(llm.Delta) {})
	e := failure(t, err, llm.KindUnavailable)
	if !strings.Contains(e.Message, "server had an error") {
		t.Errorf("Message = %q, want the event's message", e.Message)
	}
}

func TestStreamOfNonJSON(t *testing.T) {
	p, _ := literal(t, 200, sseHeader, "data: <html>\n\n")
	_, err := p.Complete(context.Background(), hello(), func(llm.Delta) {})
	failure(t, err, llm.KindMalformed)
}

func TestStreamCutShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection breaks mid-stream
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Options{Credential: llm.Credential{Key: "k"}, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), hello(), func(llm.Delta) {})
	failure(t, err, llm.KindUnavailable)
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	p, err := openai.New(openai.Options{Credential: llm.Credential{Key: "sk-unreachable"}, BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), hello(), nil)
	e := failure(t, err, llm.KindUnavailable)
	if e.Status != 0 || strings.Contains(err.Error(), "sk-unreachable") {
		t.Errorf("error = %v, want no status and no key", err)
	}
}
