package anthropictest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
)

// TestRefusesWhatTheAPIRefuses checks that the fake is as strict as the
// API, so a provider bug cannot pass against it: each request below is
// answered with the API's error and reported by Close, and none is
// recorded.
func TestRefusesWhatTheAPIRefuses(t *testing.T) {
	const good = `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name, method, path, body string
		noVersion                bool
		status                   int
		says                     string
	}{
		{"another path", http.MethodPost, "/v1/complete", good, false, http.StatusNotFound, "POST /v1/messages"},
		{"another method", http.MethodGet, "/v1/messages", "", false, http.StatusNotFound, "POST /v1/messages"},
		{"no anthropic-version", http.MethodPost, "/v1/messages", good, true, http.StatusBadRequest, "anthropic-version"},
		{"a temperature", http.MethodPost, "/v1/messages",
			`{"model":"m","max_tokens":8,"temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`, false, http.StatusBadRequest, "temperature"},
		{"no max_tokens", http.MethodPost, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false, http.StatusBadRequest, "max_tokens"},
		{"an empty text block", http.MethodPost, "/v1/messages",
			`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, false, http.StatusBadRequest, "non-empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := anthropictest.Start()
			req, err := http.NewRequest(c.method, fake.URL()+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if !c.noVersion {
				req.Header.Set("anthropic-version", "2026-10-21")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if res.StatusCode != c.status {
				t.Errorf("status = %d, want %d", res.StatusCode, c.status)
			}
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("%d requests recorded, want none", n)
			}
			if err := fake.Close(); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Close = %v, want a failure saying %q", err, c.says)
			}
		})
	}
}

func TestStartOutsideATest(t *testing.T) {
	fake := anthropictest.Start()
	fake.Enqueue(llmtest.Reply{Response: llm.Response{Model: "m", Text: "hi", StopReason: llm.StopEnd}})
	p := fake.Provider(t, "k")
	if _, err := p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("x")}}, nil); err != nil {
		t.Fatal(err)
	}
	// A request with no reply scripted is a failure Close reports.
	if _, err := p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("y")}}, nil); err == nil {
		t.Error("a request with no scripted reply succeeded")
	}
	if err := fake.Close(); err == nil || !strings.Contains(err.Error(), "no scripted reply") {
		t.Errorf("Close = %v, want the unscripted request reported", err)
	}
}
