package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/gemini"
	"github.com/loom-kernel/loom/plugins/gemini/geminitest"
)

// kindOf returns err's *llm.Error, failing t when it is not one.
func kindOf(t *testing.T, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *llm.Error", err, err)
	}
	return e
}

// noKeyAnywhere fails t when the key appears in err or in any error it
// wraps.
func noKeyAnywhere(t *testing.T, err error, key string) {
	t.Helper()
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if strings.Contains(e.Error(), key) || strings.Contains(fmt.Sprintf("%+v", e), key) {
			t.Errorf("an error in the chain echoes the API key: %v", e)
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
}

func TestKeyNeverInAnError(t *testing.T) {
	const key = "AIzaSy-very-SECRET-key-0123456789"
	for _, fail := range []llm.Kind{llm.KindRateLimited, llm.KindUnavailable, llm.KindMalformed, llm.KindInvalidRequest,
		llm.KindContextOverflow, llm.KindRefused, llm.KindUnauthorized} {
		for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
			srv := geminitest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Fail: fail, Message: "failure", RetryAfter: "3"})
			_, err := srv.Provider(t, key).Complete(context.Background(), hello(), sink)
			if err == nil {
				t.Fatalf("%s: Complete succeeded", fail)
			}
			noKeyAnywhere(t, err, key)
		}
	}
	// The network's own failure and an invalid request refused before sending.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	p, err := gemini.New(gemini.Options{Credential: llm.Credential{Key: key}, BaseURL: dead.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), hello(), nil)
	if e := kindOf(t, err); e.Kind != llm.KindUnavailable {
		t.Errorf("a refused connection is %s, want unavailable", e.Kind)
	}
	noKeyAnywhere(t, err, key)
	_, err = p.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("no model")}}, nil)
	if e := kindOf(t, err); e.Kind != llm.KindInvalidRequest {
		t.Errorf("a request with no model is %s, want invalidRequest", e.Kind)
	}
	noKeyAnywhere(t, err, key)
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	srv := geminitest.NewServer(t)
	p := srv.Provider(t, llmtest.APIKey)
	gemini.SetClock(p, func() time.Time { return now })
	srv.Enqueue(llmtest.Reply{Fail: llm.KindRateLimited, Message: "slow down", RetryAfter: now.Add(42 * time.Second).Format(http.TimeFormat)})
	_, err := p.Complete(context.Background(), hello(), nil)
	e := kindOf(t, err)
	if e.Kind != llm.KindRateLimited || e.RetryAfter != 42*time.Second || e.Status != http.StatusTooManyRequests {
		t.Fatalf("error = %+v, want rateLimited (HTTP 429) retrying after 42s", e)
	}
}

// TestRetryInfoWithoutHeader reads the hint Gemini usually gives: a
// google.rpc.RetryInfo detail, with no Retry-After header.
func TestRetryInfoWithoutHeader(t *testing.T) {
	p, hits := rawServer(t, answerWith(429, nil, `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).",
"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"12.5s"}]}}`))
	_, err := p.Complete(context.Background(), hello(), nil)
	e := kindOf(t, err)
	if e.Kind != llm.KindRateLimited || e.RetryAfter != 12500*time.Millisecond || !strings.Contains(e.Message, "Resource has been exhausted") {
		t.Fatalf("error = %+v, want rateLimited retrying after 12.5s with the API's message", e)
	}
	if hits.Load() != 1 {
		t.Fatalf("the server got %d requests, want 1", hits.Load())
	}
}

func TestUnauthorizedStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`},
		{403, `{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}`},
		{400, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`},
	} {
		p, _ := rawServer(t, answerWith(tc.status, nil, tc.body))
		_, err := p.Complete(context.Background(), hello(), nil)
		if e := kindOf(t, err); e.Kind != llm.KindUnauthorized || e.Status != tc.status {
			t.Errorf("HTTP %d = %+v, want unauthorized", tc.status, e)
		}
	}
}

func TestStatusKinds(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   llm.Kind
	}{
		{404, `{"error":{"code":404,"message":"models/nope is not found for API version v1beta","status":"NOT_FOUND"}}`, llm.KindInvalidRequest},
		{400, `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, llm.KindContextOverflow},
		{400, `{"error":{"code":400,"message":"Request payload size exceeds the limit: 20971520 bytes.","status":"INVALID_ARGUMENT"}}`, llm.KindContextOverflow},
		{500, `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, llm.KindUnavailable},
		{504, `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`, llm.KindUnavailable},
		{502, `<html>Bad Gateway</html>`, llm.KindUnavailable},
	} {
		p, hits := rawServer(t, answerWith(tc.status, nil, tc.body))
		_, err := p.Complete(context.Background(), hello(), nil)
		if e := kindOf(t, err); e.Kind != tc.kind || e.Status != tc.status {
			t.Errorf("HTTP %d %s = %+v, want %s", tc.status, tc.body, e, tc.kind)
		}
		if hits.Load() != 1 {
			t.Errorf("HTTP %d: the server got %d requests, want 1 (no SDK retries)", tc.status, hits.Load())
		}
	}
}

// TestErrorEventInsideAStream maps an error the API sends as an event after
// a 200 by the error's own code.
func TestErrorEventInsideAStream(t *testing.T) {
	p, _ := rawServer(t, answerWith(200, nil, "",
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Partial"}]}}]}`,
		`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`))
	var text strings.Builder
	_, err := p.Complete(context.Background(), hello(), func(d llm.Delta) { text.WriteString(d.Text) })
	if e := kindOf(t, err); e.Kind != llm.KindUnavailable || e.Status != 503 || e.Message != "The model is overloaded." {
		t.Fatalf("error = %+v, want unavailable (503) with the API's message", e)
	}
	if text.String() != "Partial" {
		t.Errorf("streamed %q before the error, want %q", text.String(), "Partial")
	}
}

// TestBrokenStreamIsUnavailable cuts the connection mid-answer: that is the
// network's failure, not a malformed answer.
func TestBrokenStreamIsUnavailable(t *testing.T) {
	p, hits := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Half"}]}}]}` + "\r\n\r\n"))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	})
	_, err := p.Complete(context.Background(), hello(), func(llm.Delta) {})
	if e := kindOf(t, err); e.Kind != llm.KindUnavailable {
		t.Fatalf("a stream cut mid-answer = %+v, want unavailable", e)
	}
	if hits.Load() != 1 {
		t.Fatalf("the server got %d requests, want 1 (the SDK must not reconnect)", hits.Load())
	}
}

func TestCancelBeforeTheCall(t *testing.T) {
	srv := geminitest.NewServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		_, err := srv.Provider(t, llmtest.APIKey).Complete(ctx, hello(), sink)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Complete with a cancelled ctx = %v, want context.Canceled", err)
		}
		kindOf(t, err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the server got %d requests, want none", n)
	}
}
