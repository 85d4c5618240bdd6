package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
)

func TestConformance(t *testing.T) {
	llmtest.RunProvider(t, func(t *testing.T, key string) llmtest.Target {
		srv := anthropictest.NewServer(t)
		return llmtest.Target{Server: srv, Provider: srv.Provider(t, key), Normalize: normalize}
	})
}

// normalize is what the Messages API's wire format carries back of a
// request: no temperature (API version 2026-10-21 refuses sampling
// parameters), no structured-output name, and a MaxTokens always set.
func normalize(r llm.Request) llm.Request {
	r.Temperature = nil
	if r.MaxTokens == 0 {
		r.MaxTokens = llm.DefaultMaxTokens
	}
	if r.ResponseFormat != nil {
		f := *r.ResponseFormat
		f.Name = ""
		r.ResponseFormat = &f
	}
	return r
}

// ask is a one-message request.
func ask(text string) llm.Request {
	return llm.Request{Model: "claude-test", Messages: []llm.Message{llm.UserText(text)}, MaxTokens: 64}
}

var plain = llmtest.Reply{Response: llm.Response{Model: "claude-test", Text: "ok", StopReason: llm.StopEnd}}

// rawAPI serves every request with handle, standing in for the API where
// the fake cannot say what a test needs, and returns a provider aimed at it.
func rawAPI(t *testing.T, handle http.HandlerFunc) *anthropic.Provider {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	p, err := anthropic.New(anthropic.Options{Credential: llm.Credential{Key: llmtest.APIKey}, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func asError(t *testing.T, err error, kind llm.Kind) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want an *llm.Error of kind %s", err, err, kind)
	}
	if e.Kind != kind {
		t.Fatalf("kind = %s, want %s (%v)", e.Kind, kind, err)
	}
	return e
}

func TestKeyFromEnvironmentByDefault(t *testing.T) {
	t.Setenv(anthropic.EnvAPIKey, "sk-ant-from-env")
	srv := anthropictest.NewServer(t)
	srv.Enqueue(plain, plain)
	p, err := anthropic.New(anthropic.Options{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), ask("hi"), nil); err != nil {
		t.Fatal(err)
	}
	// A key given outright wins over the environment.
	explicit, _ := anthropic.New(anthropic.Options{BaseURL: srv.URL(), Credential: llm.Credential{Key: "sk-ant-explicit"}})
	if _, err := explicit.Complete(context.Background(), ask("hi"), nil); err != nil {
		t.Fatal(err)
	}
	rs := srv.Requests()
	if len(rs) != 2 || rs[0].APIKey != "sk-ant-from-env" || rs[1].APIKey != "sk-ant-explicit" {
		t.Fatalf("keys sent = %+v, want the environment's, then the explicit one", rs)
	}
}

func TestMissingKeyIsRefusedBeforeSending(t *testing.T) {
	t.Setenv(anthropic.EnvAPIKey, "")
	srv := anthropictest.NewServer(t)
	for _, cred := range []llm.Credential{{}, {Env: "LOOM_TEST_NO_SUCH_KEY"}, {Secret: "anthropic-key"}} {
		p, err := anthropic.New(anthropic.Options{BaseURL: srv.URL(), Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
			_, err = p.Complete(context.Background(), ask("hi"), sink)
			if !errors.Is(err, llm.ErrNoCredential) {
				t.Fatalf("Complete with %+v = %v, want llm.ErrNoCredential", cred, err)
			}
			asError(t, err, llm.KindUnauthorized)
		}
		if cred == (llm.Credential{}) && !strings.Contains(err.Error(), anthropic.EnvAPIKey) {
			t.Errorf("error %q does not name %s", err, anthropic.EnvAPIKey)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the server got %d requests, want none without a key", n)
	}
}

// TestKeyNeverInAnError checks every error's whole chain: the SDK's own
// error, which holds the request and so the key in its headers, must not
// be part of it.
func TestKeyNeverInAnError(t *testing.T) {
	const key = "sk-ant-api03-NEVER-PRINT-ME"
	var errs []error
	for _, kind := range []llm.Kind{llm.KindRateLimited, llm.KindUnavailable, llm.KindMalformed,
		llm.KindInvalidRequest, llm.KindContextOverflow, llm.KindRefused, llm.KindUnauthorized} {
		for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
			srv := anthropictest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Fail: kind, RetryAfter: "1"})
			_, err := srv.Provider(t, key).Complete(context.Background(), ask("hi"), sink)
			errs = append(errs, err)
		}
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	p, _ := anthropic.New(anthropic.Options{Credential: llm.Credential{Key: key}, BaseURL: closed.URL})
	_, err := p.Complete(context.Background(), ask("hi"), nil)
	errs = append(errs, asError(t, err, llm.KindUnavailable))
	for _, err := range errs {
		if err == nil {
			t.Fatal("a scripted failure did not fail")
		}
		var sdkErr *sdk.Error
		if errors.As(err, &sdkErr) {
			t.Errorf("%v wraps the SDK's *Error, which holds the request's headers", err)
		}
		walk(err, func(e error) {
			if s := fmt.Sprintf("%v %+v %#v", e, e, e); strings.Contains(s, key) {
				t.Errorf("an error in the chain shows the key: %s", s)
			}
		})
	}
}

func walk(err error, visit func(error)) {
	if err == nil {
		return
	}
	visit(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, visit)
		}
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(time.Hour).Format(http.TimeFormat), 5 * time.Minute}, // capped
		{"1.5", 1500 * time.Millisecond},
		{"soon", 0},
	} {
		srv := anthropictest.NewServer(t)
		srv.Enqueue(llmtest.Reply{Fail: llm.KindRateLimited, RetryAfter: c.header})
		p, _ := anthropic.New(anthropic.Options{Credential: llm.Credential{Key: "k"}, BaseURL: srv.URL(), Now: func() time.Time { return now }})
		_, err := p.Complete(context.Background(), ask("hi"), nil)
		if e := asError(t, err, llm.KindRateLimited); e.RetryAfter != c.want {
			t.Errorf("Retry-After %q: RetryAfter = %v, want %v", c.header, e.RetryAfter, c.want)
		}
	}
}

func TestNameAndBaseURL(t *testing.T) {
	srv := anthropictest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Fail: llm.KindUnavailable})
	p, err := anthropic.New(anthropic.Options{Name: "claude-eu", Credential: llm.Credential{Key: "k"}, BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "claude-eu" {
		t.Errorf("Name() = %q", p.Name())
	}
	_, err = p.Complete(context.Background(), ask("hi"), nil)
	if e := asError(t, err, llm.KindUnavailable); e.Provider != "claude-eu" {
		t.Errorf("Error.Provider = %q, want the configured name", e.Provider)
	}
	if def, _ := anthropic.New(anthropic.Options{}); def.Name() != anthropic.ProviderName {
		t.Errorf("default Name() = %q, want %q", def.Name(), anthropic.ProviderName)
	}
	for _, bad := range []string{"api.anthropic.com", "ftp://api.anthropic.com", "/v1", "http://[::1"} {
		if _, err := anthropic.New(anthropic.Options{BaseURL: bad}); err == nil {
			t.Errorf("New accepted base URL %q", bad)
		}
	}
}
