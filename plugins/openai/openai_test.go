package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/openai"
	"github.com/loom-kernel/loom/plugins/openai/openaitest"
)

func TestConformance(t *testing.T) {
	llmtest.RunProvider(t, func(t *testing.T, key string) llmtest.Target {
		s := openaitest.NewServer(t)
		return llmtest.Target{Server: s, Provider: s.Provider(t, key), Normalize: openaitest.Normalize}
	})
}

func hello() llm.Request {
	return llm.Request{Model: "gpt-test", Messages: []llm.Message{llm.UserText("hello")}}
}

func TestKeyFromEnvironmentByDefault(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "sk-from-the-environment")
	s := openaitest.NewServer(t)
	p, err := openai.New(openai.Options{BaseURL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	s.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gpt-test", Text: "hi", StopReason: llm.StopEnd}})
	if _, err := p.Complete(context.Background(), hello(), nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got := s.Requests()[0].APIKey; got != "sk-from-the-environment" {
		t.Errorf("the request carried key %q, want the one in %s", got, openai.EnvAPIKey)
	}
}

func TestMissingKeyIsRefusedBeforeSending(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	s := openaitest.NewServer(t)
	p, err := openai.New(openai.Options{BaseURL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		_, err := p.Complete(context.Background(), hello(), sink)
		if !errors.Is(err, llm.ErrNoCredential) {
			t.Fatalf("Complete without a key = %v, want llm.ErrNoCredential", err)
		}
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindUnauthorized || e.Provider != "openai" {
			t.Errorf("Complete without a key = %#v, want an unauthorized *llm.Error from openai", err)
		}
		if !strings.Contains(err.Error(), openai.EnvAPIKey) {
			t.Errorf("error %q does not say where the key was looked for", err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("the server got %d requests without a key, want none", n)
	}
}

func TestKeyNeverInAnError(t *testing.T) {
	const key = "sk-proj-VERY-secret-0123456789"
	for _, stream := range []bool{false, true} {
		s := openaitest.NewServer(t)
		p := s.Provider(t, key)
		// A proxy that echoes the key whole, in the API's own error body.
		s.Enqueue(llmtest.Reply{Fail: llm.KindUnauthorized, Message: "Incorrect API key provided: " + key + "."})
		var sink func(llm.Delta)
		if stream {
			sink = func(llm.Delta) {}
		}
		_, err := p.Complete(context.Background(), hello(), sink)
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindUnauthorized || e.Status != http.StatusUnauthorized {
			t.Fatalf("Complete = %v, want an unauthorized *llm.Error with HTTP 401", err)
		}
		if strings.Contains(err.Error(), key) || strings.Contains(e.Message, key) {
			t.Errorf("the error echoes the key: %q", err)
		}
		if !strings.Contains(e.Message, "Incorrect API key provided") {
			t.Errorf("Message = %q, want the API's message (redacted)", e.Message)
		}
		// The SDK's error is kept for errors.As, without the request whose
		// headers hold the key.
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("the cause is not the SDK's *openai.Error: %v", err)
		}
		if apiErr.Request != nil || apiErr.Response != nil || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
			t.Errorf("the SDK error keeps the request or lost its status/code: %+v", *apiErr)
		}
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	s := openaitest.NewServer(t)
	p := s.Provider(t, llmtest.APIKey)
	when := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	s.Enqueue(llmtest.Reply{Fail: llm.KindRateLimited, Message: "slow down", RetryAfter: when})
	_, err := p.Complete(context.Background(), hello(), nil)
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindRateLimited {
		t.Fatalf("Complete = %v, want rate limited", err)
	}
	// An HTTP date has whole seconds: the hint is 89–90s from now, less the
	// time the call took (bounded loosely, not a timing assertion).
	if e.RetryAfter <= 30*time.Second || e.RetryAfter > 90*time.Second {
		t.Errorf("RetryAfter = %v from the date %s, want about 90s", e.RetryAfter, when)
	}
	if len(s.Requests()) != 1 {
		t.Errorf("the server got %d requests, want 1", len(s.Requests()))
	}
}

func TestUsageWithCacheTokens(t *testing.T) {
	want := llm.Usage{InputTokens: 300, OutputTokens: 20, CacheReadTokens: 600, CacheWriteTokens: 100}
	for _, stream := range []bool{false, true} {
		s := openaitest.NewServer(t)
		p := s.Provider(t, llmtest.APIKey)
		s.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gpt-test", Text: "cached", StopReason: llm.StopEnd, Usage: want}})
		var sink func(llm.Delta)
		if stream {
			sink = func(llm.Delta) {}
		}
		got, err := p.Complete(context.Background(), hello(), sink)
		if err != nil {
			t.Fatalf("Complete (stream %v): %v", stream, err)
		}
		if got.Usage != want || got.Usage.Total() != 1020 {
			t.Errorf("usage (stream %v) = %+v, want %+v (prompt_tokens 1000 includes the cache)", stream, got.Usage, want)
		}
	}
}

func TestToolResultErrorAndSchemaNumbersRoundTrip(t *testing.T) {
	s := openaitest.NewServer(t)
	p := s.Provider(t, llmtest.APIKey)
	req := llm.Request{Model: "gpt-test",
		Tools: []llm.Tool{{Name: "pick", InputSchema: json.RawMessage(
			`{"type":"object","properties":{"n":{"type":"integer","minimum":0.5,"maximum":9007199254740993}}}`)}},
		Messages: []llm.Message{
			llm.UserText("pick one"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "pick", Arguments: json.RawMessage(`{"n":3}`)},
				{ID: "call_2", Name: "pick"},
			}},
			{Role: llm.RoleTool, ToolResults: []llm.ToolResult{{CallID: "call_1", Name: "pick", Content: "n is too big", IsError: true}}},
			{Role: llm.RoleTool, ToolResults: []llm.ToolResult{{CallID: "call_2", Content: `{"ok":true}`}}},
		}}
	s.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gpt-test", Text: "done", StopReason: llm.StopEnd}})
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := s.Requests()[0].Request
	results := got.Messages[2].ToolResults
	if len(got.Messages) != 3 || len(results) != 2 {
		t.Fatalf("the server decoded messages %+v, want the two tool messages as one", got.Messages)
	}
	if !results[0].IsError || results[0].Content != "n is too big" || results[1].IsError || results[1].Name != "pick" {
		t.Errorf("tool results = %+v, want the failure flagged and both named after their calls", results)
	}
	if string(got.Tools[0].InputSchema) == "" || !strings.Contains(string(got.Tools[0].InputSchema), "9007199254740993") {
		t.Errorf("the schema's numbers changed on the wire: %s", got.Tools[0].InputSchema)
	}
	if !llmtest.SameRequest(got, openaitest.Normalize(req)) {
		t.Errorf("the server decoded %+v, want %+v", got, openaitest.Normalize(req))
	}
}

func TestRequestTheAPICannotCarryIsNotSent(t *testing.T) {
	s := openaitest.NewServer(t)
	p := s.Provider(t, llmtest.APIKey)
	bad := []llm.Request{
		{Model: "m", Messages: []llm.Message{{Role: "system", Text: "not a message role"}}},
		{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool}}},
		{Model: "m", Messages: []llm.Message{llm.UserText("x")}, Tools: []llm.Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
		{Model: "m", Messages: []llm.Message{llm.UserText("x")}, ResponseFormat: &llm.ResponseFormat{Name: "r", Schema: json.RawMessage(`{`)}},
	}
	for i, req := range bad {
		_, err := p.Complete(context.Background(), req, nil)
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindInvalidRequest || e.Status != 0 {
			t.Errorf("request %d: Complete = %v, want an invalid request refused before sending", i, err)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
}

func TestDeadlineWhileWaiting(t *testing.T) {
	s := openaitest.NewServer(t)
	p := s.Provider(t, llmtest.APIKey)
	s.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gpt-test", Text: "never", StopReason: llm.StopEnd}, Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Complete(ctx, hello(), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Complete past its deadline = %v, want an error matching context.DeadlineExceeded", err)
	}
}

func TestNew(t *testing.T) {
	for _, base := range []string{"api.openai.com/v1", "ftp://example.com", "http://"} {
		if _, err := openai.New(openai.Options{BaseURL: base}); err == nil {
			t.Errorf("New with base URL %q succeeded, want an error", base)
		}
	}
	p, err := openai.New(openai.Options{})
	if err != nil || p.Name() != openai.DefaultName {
		t.Errorf("New(zero) = %v, %v; want a provider named %q", p, err, openai.DefaultName)
	}
	if p, _ := openai.New(openai.Options{Name: "local-vllm"}); p.Name() != "local-vllm" {
		t.Errorf("Name() = %q, want the configured one", p.Name())
	}
}
