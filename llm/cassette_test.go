package llm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

func TestCassetteRecordsThenReplaysOffline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "triage.json")
	real := llmtest.NewProvider(t, "anthropic")
	real.Enqueue(llmtest.Text("it is the deploy", 40, 8), llmtest.Reply{Fail: llm.KindRefused, Message: "no"})
	rec, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: real,
		ScrubRequest: func(r llm.Request) llm.Request {
			for i := range r.Messages {
				r.Messages[i].Text = strings.ReplaceAll(r.Messages[i].Text, "ada@example.com", "<email>")
			}
			return r
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := rec.Complete(ctx, ask("ada@example.com says checkout is slow"), nil)
	if err != nil || got.Text != "it is the deploy" {
		t.Fatalf("recording: %+v, %v", got, err)
	}
	if _, err := rec.Complete(ctx, ask("something it refuses"), nil); err == nil {
		t.Fatalf("recording a refusal: %v", err)
	}
	if err := rec.Save(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "ada@example.com") || !strings.Contains(string(raw), "<email>") {
		t.Fatalf("the cassette was not scrubbed:\n%s", raw)
	}

	play, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Replay, ScrubRequest: func(r llm.Request) llm.Request {
		for i := range r.Messages {
			r.Messages[i].Text = strings.ReplaceAll(r.Messages[i].Text, "ada@example.com", "<email>")
		}
		return r
	}})
	if err != nil {
		t.Fatal(err)
	}
	if play.Name() != "anthropic" || play.Len() != 2 {
		t.Fatalf("replay cassette %s with %d interactions", play.Name(), play.Len())
	}
	var streamed strings.Builder
	again, err := play.Complete(ctx, ask("ada@example.com says checkout is slow"), func(d llm.Delta) { streamed.WriteString(d.Text) })
	if err != nil || again.Text != "it is the deploy" || streamed.String() != "it is the deploy" {
		t.Fatalf("replay: %+v (streamed %q), %v", again, streamed.String(), err)
	}
	_, err = play.Complete(ctx, ask("something it refuses"), nil)
	if f, ok := llm.FailureOf(err); !ok || f.Kind != llm.KindRefused {
		t.Fatalf("replayed refusal = %v", err)
	}
	if n := len(real.Requests()); n != 2 {
		t.Fatalf("the real provider got %d requests, want 2 (replay is offline)", n)
	}
}

func TestCassetteRefusesAnUnrecordedRequestNamingTheNearest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	real := llmtest.NewProvider(t, "openai")
	real.Enqueue(llmtest.Text("a", 1, 1), llmtest.Text("b", 1, 1))
	rec, _ := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: real})
	ctx := context.Background()
	if _, err := rec.Complete(ctx, ask("checkout is slow since 14:05"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Complete(ctx, ask("search is down"), nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(); err != nil {
		t.Fatal(err)
	}
	play, _ := llm.OpenCassette(path, llm.CassetteOptions{})
	_, err := play.Complete(ctx, ask("checkout is slow since 14:06"), nil)
	var un *llm.UnrecordedRequestError
	if !errors.As(err, &un) {
		t.Fatalf("err = %v, want *llm.UnrecordedRequestError", err)
	}
	want, _ := llm.Digest(ask("checkout is slow since 14:06"))
	nearest, _ := llm.Digest(ask("checkout is slow since 14:05"))
	if un.Digest != want || un.Nearest != nearest || !strings.Contains(un.Differs, "since 14:0") {
		t.Fatalf("refusal = %+v", un)
	}
	if _, err := llm.OpenCassette(filepath.Join(t.TempDir(), "missing.json"), llm.CassetteOptions{}); err == nil {
		t.Fatal("replaying a missing cassette opened")
	}
	if _, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record}); err == nil {
		t.Fatal("recording without a provider opened")
	}
}

func TestDigestIsCanonical(t *testing.T) {
	a := llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("x")},
		Tools: []llm.Tool{{Name: "t", InputSchema: []byte(`{"type": "object", "properties": {}}`)}}}
	b := a
	b.Tools = []llm.Tool{{Name: "t", InputSchema: []byte(`{"properties":{},"type":"object"}`)}}
	da, _ := llm.Digest(a)
	db, _ := llm.Digest(b)
	if da != db || !strings.HasPrefix(da, "sha256:") {
		t.Fatalf("digests %s and %s", da, db)
	}
}

func TestPricesLookup(t *testing.T) {
	p := llm.DefaultPrices.Merge(llm.Prices{"my-model": {InputPerMTok: 1, OutputPerMTok: 2}})
	cases := []struct {
		provider, model string
		want            float64
		ok              bool
	}{
		{"anthropic", "claude-sonnet-4-5-20250929", 3, true},
		{"openai", "gpt-4.1-mini-2025-04-14", 0.4, true}, // the longer prefix wins over gpt-4.1*
		{"openai", "gpt-4.1", 2, true},
		{"anywhere", "my-model", 1, true},
		{"openai", "unknown", 0, false},
	}
	for _, c := range cases {
		got, ok := p.Lookup(c.provider, c.model)
		if ok != c.ok || got.InputPerMTok != c.want {
			t.Errorf("Lookup(%s, %s) = %+v, %v", c.provider, c.model, got, ok)
		}
	}
}

func TestReadCassetteReplaysEmbeddedBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	real := llmtest.NewProvider(t, "gemini")
	real.Enqueue(llmtest.Text("a", 1, 1))
	rec, _ := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: real})
	if _, err := rec.Complete(context.Background(), ask("q"), nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	c, err := llm.ReadCassette("embedded planner.json", raw, llm.CassetteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Models(); len(got) != 1 || got[0] != "claude-sonnet-4-5" || c.Name() != "gemini" {
		t.Fatalf("models %v, name %s", got, c.Name())
	}
	_, err = c.Complete(context.Background(), ask("other"), nil)
	var un *llm.UnrecordedRequestError
	if !errors.As(err, &un) || un.Path != "embedded planner.json" || llm.Retryable(err) {
		t.Fatalf("refusal = %v", err)
	}
	if _, err := llm.ReadCassette("x", raw, llm.CassetteOptions{Mode: llm.Record, Provider: real}); err == nil {
		t.Fatal("a cassette read from bytes opened for recording")
	}
}

func TestAChainDigestsAGrowingConversationAsDigestDoes(t *testing.T) {
	req := ask("first")
	var c llm.Chain
	for i := range 5 {
		if err := c.Extend(req.Messages); err != nil {
			t.Fatal(err)
		}
		got, err := c.Digest(req)
		want, _ := llm.Digest(req)
		if err != nil || got != want {
			t.Fatalf("turn %d: chain %s (%v), Digest %s", i, got, err, want)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Text: fmt.Sprint("answer ", i)}, llm.UserText("more"))
	}
	other := req
	other.Messages = append([]llm.Message(nil), req.Messages...)
	other.Messages[1].Text = "a different answer"
	a, _ := llm.Digest(req)
	b, _ := llm.Digest(other)
	if a == b {
		t.Fatal("two conversations that differ in one message have one digest")
	}
	if err := c.Extend(req.Messages[:2]); err == nil {
		t.Fatal("a chain extended by a shorter conversation")
	}
}
