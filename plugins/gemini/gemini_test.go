package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/gemini"
	"github.com/loom-kernel/loom/plugins/gemini/geminitest"
)

func TestConformance(t *testing.T) {
	llmtest.RunProvider(t, func(t *testing.T, key string) llmtest.Target {
		srv := geminitest.NewServer(t)
		return llmtest.Target{Server: srv, Provider: srv.Provider(t, key), Normalize: geminitest.Normalize, NoCacheWrite: true}
	})
}

// plain is a scripted answer for tests that only need the call to succeed.
var plain = llmtest.Reply{Response: llm.Response{Model: "gemini-test", Text: "ok", StopReason: llm.StopEnd}}

func TestKeyComesFromGeminiAPIKeyByDefault(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "env-key-1")
	srv := geminitest.NewServer(t)
	p, err := gemini.New(gemini.Options{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(plain)
	if _, err := p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got := srv.Requests()[0].APIKey; got != "env-key-1" {
		t.Fatalf("the request carried key %q, want the one in GEMINI_API_KEY", got)
	}
}

func TestMissingKeyIsRefusedBeforeSending(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "not-read-by-the-provider")
	srv := geminitest.NewServer(t)
	p, err := gemini.New(gemini.Options{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		_, err = p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, sink)
		if !errors.Is(err, llm.ErrNoCredential) {
			t.Fatalf("Complete without a key = %v, want llm.ErrNoCredential", err)
		}
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindUnauthorized || e.Provider != "gemini" {
			t.Fatalf("Complete without a key = %#v, want a gemini *llm.Error of kind unauthorized", err)
		}
		if !strings.Contains(err.Error(), "GEMINI_API_KEY") {
			t.Errorf("the error %q does not say which variable to set", err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("the server got %d requests, want none", n)
	}
}

// TestSDKEnvironmentChangesNothing sets every variable the genai SDK reads
// when it builds a client: the call still goes to the configured server,
// over the Gemini API paths, with the configured key.
func TestSDKEnvironmentChangesNothing(t *testing.T) {
	for k, v := range map[string]string{ //loom:order-independent each variable on its own
		"GOOGLE_API_KEY": "wrong-google-key", "GEMINI_API_KEY": "wrong-gemini-key",
		"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_GENAI_USE_ENTERPRISE": "true",
		"GOOGLE_CLOUD_PROJECT": "some-project", "GOOGLE_CLOUD_LOCATION": "us-central1", "GOOGLE_CLOUD_REGION": "eu",
		"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:1/", "GOOGLE_VERTEX_BASE_URL": "http://127.0.0.1:1/",
		"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/credentials.json",
	} {
		t.Setenv(k, v)
	}
	srv := geminitest.NewServer(t)
	srv.Enqueue(plain, plain)
	p := srv.Provider(t, "configured-key")
	for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		if _, err := p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, sink); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	for _, r := range srv.Requests() {
		if r.APIKey != "configured-key" {
			t.Errorf("the request carried key %q, want the configured one", r.APIKey)
		}
	}
}

// TestRotatedKeyIsSent resolves the key on every call: a secret that
// changes between calls reaches the server changed.
func TestRotatedKeyIsSent(t *testing.T) {
	var n atomic.Int64
	resolver := middleware.SecretResolverFunc(func(context.Context, string) (string, error) {
		if n.Add(1) == 1 {
			return "key-before", nil
		}
		return "key-after", nil
	})
	srv := geminitest.NewServer(t)
	p, err := gemini.New(gemini.Options{BaseURL: srv.URL(), Credential: llm.Credential{Secret: "gemini", Resolver: resolver}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(plain, plain, plain)
	for range 3 {
		if _, err := p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, nil); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, r.APIKey)
	}
	if strings.Join(got, ",") != "key-before,key-after,key-after" {
		t.Fatalf("keys sent = %v, want key-before then key-after twice", got)
	}
}

func TestNewRefusesABaseURLThatIsNotHTTP(t *testing.T) {
	for _, base := range []string{"localhost:8080", "ftp://example.com/", "http://", "::"} {
		if _, err := gemini.New(gemini.Options{BaseURL: base}); err == nil {
			t.Errorf("New with BaseURL %q succeeded, want an error", base)
		}
	}
}

func TestNameDefaultsAndOverrides(t *testing.T) {
	p, err := gemini.New(gemini.Options{})
	if err != nil || p.Name() != "gemini" {
		t.Fatalf("New(Options{}) = %v, %v; want a provider named gemini", p, err)
	}
	p, err = gemini.New(gemini.Options{Name: "gemini-eu"})
	if err != nil || p.Name() != "gemini-eu" {
		t.Fatalf("New with Name = %v, %v; want gemini-eu", p, err)
	}
}

// rawServer is a server answering every request with handle, for the
// shapes the scripted fake does not send.
func rawServer(t *testing.T, handle http.HandlerFunc) (*gemini.Provider, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		handle(w, r)
	}))
	t.Cleanup(srv.Close)
	p, err := gemini.New(gemini.Options{Credential: llm.Credential{Key: llmtest.APIKey}, BaseURL: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, &hits
}

// answerWith is a handler sending body as JSON, or as SSE events when the
// request streams (body is then one event per element of events).
func answerWith(status int, header http.Header, body string, events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header { //loom:order-independent headers are a set
			w.Header()[k] = v
		}
		if r.URL.Query().Get("alt") == "sse" && len(events) > 0 {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(status)
			for _, e := range events {
				_, _ = w.Write([]byte("data: " + e + "\r\n\r\n"))
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func hello() llm.Request {
	return llm.Request{Model: "gemini-test", Messages: []llm.Message{llm.UserText("hello")}}
}
