package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store/memstore"
)

// worldClock is the runtime's clock; the tool moves it on a minute per
// call, as if each call took that long.
type worldClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *worldClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *worldClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestTheDeadlineStopsTheRunOnTheRecordedClock(t *testing.T) {
	h := newHarness(t)
	clock := &worldClock{t: time.UnixMilli(1_750_000_000_000)}
	h.cfg = func(c *loom.Config) { c.Clock = clock }
	slow := agent.NewTool("slow", "Takes a minute.", func(context.Context, struct{}) (string, error) {
		clock.advance(time.Minute)
		return "ok", nil
	})
	p := llmtest.NewProvider(t, "anthropic")
	for range 5 {
		p.Enqueue(llmtest.Calls(1, 1, "slow", `{}`))
	}
	cfg := agent.Config{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{slow}, Deadline: 150 * time.Second}
	res := h.runAgent(cfg)
	// Before turn 2 one minute has passed, before turn 3 two, before turn 4
	// three: past the 2.5-minute deadline.
	if r := result(t, res.Output); r.Stop != agent.StopDeadline || r.Turns != 3 {
		t.Fatalf("stop %s after %d turns, want deadline after 3", r.Stop, r.Turns)
	}
}

func TestASummarizerCompactsALongTranscriptAsADurableStep(t *testing.T) {
	h := newHarness(t)
	p := llmtest.NewProvider(t, "anthropic")
	summarizer := llmtest.NewProvider(t, "openai")
	p.Enqueue(llmtest.Calls(1, 1, "read_logs", `{"service":"a"}`), llmtest.Calls(1, 1, "read_logs", `{"service":"b"}`),
		llmtest.Text("done", 1, 1))
	summarizer.Enqueue(llmtest.Text("Logs of a and b both show an exhausted pool.", 1, 1))
	rt := h.runtime(triageFlow(p, newRuns(), func(c *agent.Config) {
		c.Compactor = agent.Summarizer{Provider: summarizer, Model: "gpt-4.1-mini", Keep: 2}
		c.CompactAtBytes = 400
	}))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "checkout is slow")
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(summarizer.Requests()) != 1 {
		t.Fatalf("summarizer requests = %d, want 1", len(summarizer.Requests()))
	}
	last := p.Requests()[2].Request.Messages
	if !strings.HasPrefix(last[0].Text, "Summary of the conversation so far:") || len(last) != 3 {
		t.Fatalf("the compacted request = %+v", last)
	}
	if _, ok := res.State.Frames["triage/turn:3/compact"]; !ok {
		t.Fatal("the compaction is not a recorded step")
	}
}

func TestALargeTranscriptIsWarnedAboutOnce(t *testing.T) {
	h := newHarness(t)
	p := llmtest.NewProvider(t, "anthropic")
	for range 3 {
		p.Enqueue(llmtest.Calls(1, 1, "read_logs", `{"service":"a"}`))
	}
	p.Enqueue(llmtest.Text("done", 1, 1))
	rt := h.runtime(triageFlow(p, newRuns(), func(c *agent.Config) { c.WarnTranscriptBytes = 200 }))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := count(h.events(id), agent.TranscriptWarningEvent); n != 1 {
		t.Fatalf("%s ×%d, want 1", agent.TranscriptWarningEvent, n)
	}
}

func TestAClaimedToolOutputIsToldToTheModelFromTheContentStore(t *testing.T) {
	h := newHarness(t)
	content := memstore.NewContentStore()
	h.cfg = func(c *loom.Config) {
		c.Middleware = []effect.Middleware{middleware.ClaimCheck(content, middleware.ClaimCheckOptions{MaxInlineBytes: 64, ToolIDs: []string{"tool:dump"}})}
	}
	big := strings.Repeat("pool exhausted; ", 40)
	dump := agent.NewTool("dump", "Dump the logs.", func(context.Context, struct{}) (string, error) { return big, nil })
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(1, 1, "dump", `{}`), llmtest.Text("done", 1, 1))
	cfg := agent.Config{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{dump}, Content: content}
	res := h.runAgent(cfg)
	told := p.Requests()[1].Request.Messages[2].ToolResults[0].Content
	want, _ := json.Marshal(big)
	if told != string(want) {
		t.Fatalf("the model was told %q", told)
	}
	if out := res.State.Frames["a/turn:1/tool:0"].Output; !strings.Contains(string(out), middleware.ClaimKey) {
		t.Fatalf("the log holds %s, want the claim", out)
	}
}

func TestStreamingDeltasReachTheSinkAndAnEffectToolRuns(t *testing.T) {
	h := newHarness(t)
	reg, err := effect.NewRegistry(map[string]effect.Func{"pager.page": func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		if string(in) != `{"args":{},"team":"sre"}` || ec.ToolID != "pager.page:sre" {
			return nil, fmt.Errorf("the effect got %s as %s", in, ec.ToolID)
		}
		return json.RawMessage(`{"paged":true}`), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg = func(c *loom.Config) { c.Effects = reg }
	page := agent.EffectTool("page", "Page the on-call.", "pager.page:sre", json.RawMessage(`{"type":"object"}`),
		agent.EffectInput(func(args json.RawMessage) (any, error) {
			return map[string]any{"team": "sre", "args": args}, nil
		}))
	var mu sync.Mutex
	var streamed strings.Builder
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(1, 1, "page", `{}`), llmtest.Text("paged them", 1, 1))
	cfg := agent.Config{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{page},
		CallOptions: []llm.CallOption{llm.Stream(func(d llm.Delta) {
			mu.Lock()
			streamed.WriteString(d.Text)
			mu.Unlock()
		})}}
	res := h.runAgent(cfg)
	if r := result(t, res.Output); r.ToolCalls[0].Status != agent.StatusOK || string(r.ToolCalls[0].Output) != `{"paged":true}` {
		t.Fatalf("entry = %+v", r.ToolCalls[0])
	}
	if streamed.String() != "paged them" || !p.Requests()[0].Stream {
		t.Fatalf("streamed %q", streamed.String())
	}
}

// blocking answers nothing until its call's context ends.
type blocking struct {
	entered chan struct{}
	ended   chan error
}

func (b blocking) Name() string { return "anthropic" }
func (b blocking) Complete(ctx context.Context, _ llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	close(b.entered)
	<-ctx.Done()
	b.ended <- ctx.Err()
	return llm.Response{}, ctx.Err()
}

func TestCancellingTheExecutionStopsTheRunMidCall(t *testing.T) {
	h := newHarness(t)
	p := blocking{entered: make(chan struct{}), ended: make(chan error, 1)}
	rt := h.runtime(triageFlow(p, newRuns(), nil))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	<-p.entered
	if err := rt.Cancel(ctx, id, "the incident resolved itself"); err != nil {
		t.Fatal(err)
	}
	res, _ := rt.WaitForCompletion(ctx, id)
	if res.Status != "cancelled" {
		t.Fatalf("status = %s, want cancelled", res.Status)
	}
	if err := <-p.ended; err == nil {
		t.Fatal("the model call's context was not cancelled")
	}
}
