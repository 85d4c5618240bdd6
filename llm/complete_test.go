package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// world is a runtime over memory stores that tests can reopen: a second
// runtime on the same stores is a new process.
type world struct {
	t      *testing.T
	stores store.Set
	cfg    func(*loom.Config)
}

func newWorld(t *testing.T, cfg func(*loom.Config)) *world {
	return &world{t: t, stores: memstore.NewSet(), cfg: cfg}
}

func (w *world) runtime(flows ...*loom.Flow) *loom.Runtime {
	w.t.Helper()
	cfg := loom.Config{Storage: w.stores, Flows: flows, Durability: loom.StepDurable}
	cfg.Recovery.Disabled = true
	if w.cfg != nil {
		w.cfg(&cfg)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		w.t.Fatalf("loom.New: %v", err)
	}
	w.t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func (w *world) events(id string) []event.Envelope {
	w.t.Helper()
	evs, err := w.stores.Events.ReadFrom(context.Background(), id, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

// parkThenResume is two processes: the first starts flow and runs it to its
// "go" gate, the second resumes it there and runs it to the end (every
// recorded call served from the log).
func (w *world) parkThenResume(flow func() *loom.Flow, input any) (string, loom.Result) {
	w.t.Helper()
	ctx := context.Background()
	rt := w.runtime(flow())
	id, err := rt.Start(ctx, flow().ID, input)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		w.t.Fatal(err)
	}
	_ = rt.Close()
	rt2 := w.runtime(flow())
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "go"}); err != nil {
		w.t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return id, res
}

func ofType(evs []event.Envelope, typ string) []event.Envelope {
	var out []event.Envelope
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func ask(text string) llm.Request {
	return llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{llm.UserText(text)}}
}

// askThenGate calls the model, parks on a gate, and returns the answer
// after the resume: a resume in another runtime replays the call.
func askThenGate(p llm.Provider, opts ...llm.CallOption) *loom.Flow {
	return loom.NewFlow("ask", func(ctx *loom.Context, q string) (string, error) {
		resp, err := llm.Complete(ctx, "model", p, ask(q), opts...)
		if err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("go"); err != nil {
			return "", err
		}
		return resp.Text, nil
	})
}

func TestCompleteRecordsTheResponseAndReplayNeverCallsTheProvider(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Text("roll back v42", 1000, 200))
	// A second process resumes: the flow re-runs, the call is served.
	id, res := w.parkThenResume(func() *loom.Flow { return askThenGate(p) }, "what now?")
	if string(res.Output) != `"roll back v42"` {
		t.Fatalf("output = %s", res.Output)
	}
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("the provider got %d requests, want 1 (the resume must be served from the log)", n)
	}
	evs := w.events(id)
	started := ofType(evs, event.StepStarted)
	if len(started) != 1 {
		t.Fatalf("STEP_STARTED ×%d, want 1", len(started))
	}
	var start struct {
		Kind   string          `json:"kind"`
		ToolID string          `json:"toolId"`
		Input  llm.CallRecord  `json:"input"`
		Raw    json.RawMessage `json:"-"`
	}
	if err := json.Unmarshal(started[0].Payload, &start); err != nil {
		t.Fatal(err)
	}
	digest, _ := llm.Digest(ask("what now?"))
	if start.Kind != "llm" || start.ToolID != "llm:anthropic/claude-sonnet-4-5" || start.Input.Digest != digest || start.Input.Request != nil {
		t.Fatalf("STEP_STARTED = %s", started[0].Payload)
	}
	// Metered without a ring of the app's: tokens and the list price.
	metered := ofType(evs, event.ResourceMetered)
	if len(metered) != 1 {
		t.Fatalf("RESOURCE_METERED ×%d, want 1", len(metered))
	}
	var m struct {
		Tokens  float64 `json:"tokens"`
		CostUSD float64 `json:"costUsd"`
	}
	if err := json.Unmarshal(metered[0].Payload, &m); err != nil {
		t.Fatal(err)
	}
	if want := 1000*3/1e6 + 200*15/1e6; m.Tokens != 1200 || m.CostUSD != want {
		t.Fatalf("metered %s, want tokens 1200 and costUsd %v", metered[0].Payload, want)
	}
	if r := res.State.Variables.Resources; r == nil || r.Tokens == nil || *r.Tokens != 1200 {
		t.Fatalf("_resources = %+v", r)
	}
}

func TestCompleteUnderTheAppsMeteringRingRecordsOneFactAndTheBudgetDeniesTheNextCall(t *testing.T) {
	w := newWorld(t, func(c *loom.Config) {
		c.Middleware = []effect.Middleware{middleware.Metering(middleware.Meter{}, middleware.Budget{Tokens: 1000})}
	})
	p := llmtest.NewProvider(t, "openai")
	p.Enqueue(llmtest.Text("first", 900, 300))
	flow := loom.NewFlow("two", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := llm.Complete(ctx, "first", p, ask("one")); err != nil {
			return "", err
		}
		_, err := llm.Complete(ctx, "second", p, ask("two"))
		var q *middleware.QuotaExceededError
		if errors.As(err, &q) {
			return "denied on " + q.Dimension, nil
		}
		return "", err
	})
	rt := w.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "two", nil)
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"denied on tokens"` {
		t.Fatalf("output = %s", res.Output)
	}
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("the provider got %d requests, want 1 (the denied call must not reach it)", n)
	}
	evs := w.events(id)
	if n := len(ofType(evs, event.ResourceMetered)); n != 1 {
		t.Fatalf("RESOURCE_METERED ×%d, want 1 (one ring meters once)", n)
	}
	if n := len(ofType(evs, event.QuotaExceeded)); n != 1 {
		t.Fatalf("QUOTA_EXCEEDED ×%d, want 1", n)
	}
}

// sleeps records the retry waits instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func TestCompleteRetriesARateLimitAfterTheAPIsRetryAfter(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Reply{Fail: llm.KindRateLimited, RetryAfter: "7", Message: "slow down"}, llmtest.Text("ok", 10, 2))
	var s sleeps
	policy := llm.DefaultRetry
	policy.Sleep = s.sleep
	flow := loom.NewFlow("retry", func(ctx *loom.Context, _ struct{}) (string, error) {
		resp, err := llm.Complete(ctx, "model", p, ask("hi"), llm.WithRetry(policy))
		return resp.Text, err
	})
	rt := w.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "retry", nil)
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"ok"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	if len(s.d) != 1 || s.d[0] != 7*time.Second {
		t.Fatalf("waited %v, want [7s] (the Retry-After hint beats the 1 s backoff)", s.d)
	}
	retrying := ofType(w.events(id), event.StepRetrying)
	if len(retrying) != 1 || !strings.Contains(string(retrying[0].Payload), `"delayMs":7000`) {
		t.Fatalf("STEP_RETRYING = %v", retrying)
	}
	if n := len(ofType(w.events(id), event.ResourceMetered)); n != 2 {
		t.Fatalf("RESOURCE_METERED ×%d, want one per attempt", n)
	}
}

func TestCompleteTypedFailureIsCaughtAndServedOnReplay(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "gemini")
	p.Enqueue(llmtest.Reply{Fail: llm.KindContextOverflow, Message: "input too long"})
	flow := func() *loom.Flow {
		return loom.NewFlow("catch", func(ctx *loom.Context, _ struct{}) (string, error) {
			_, err := llm.Complete(ctx, "model", p, ask("a very long prompt"))
			f, ok := llm.FailureOf(err)
			if !ok {
				return "", err
			}
			if _, err := ctx.Suspend("go"); err != nil {
				return "", err
			}
			return string(f.Kind) + ": " + f.Message, nil
		})
	}
	id, res := w.parkThenResume(flow, nil)
	if string(res.Output) != `"contextOverflow: input too long"` {
		t.Fatalf("output = %s", res.Output)
	}
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("provider requests = %d, want 1 (the typed failure is served on replay)", n)
	}
	failed := ofType(w.events(id), event.StepFailed)
	if len(failed) != 1 || !strings.Contains(string(failed[0].Payload), `"channel":"contextOverflow"`) {
		t.Fatalf("STEP_FAILED = %v", failed)
	}
}

func TestCompleteRefusesReusingAnIDForAnotherRequest(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Text("a", 1, 1))
	flow := loom.NewFlow("reuse", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := llm.Complete(ctx, "model", p, ask("one")); err != nil {
			return "", err
		}
		_, err := llm.Complete(ctx, "model", p, ask("two"))
		var reused *loom.StepReusedError
		if errors.As(err, &reused) {
			return "refused", nil
		}
		return "", err
	})
	rt := w.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "reuse", nil)
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"refused"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("provider requests = %d, want 1", n)
	}
}

func TestCompleteStreamsDeltasLiveAndNeverRecordsThem(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Text("streamed answer here", 5, 5))
	var mu sync.Mutex
	var got strings.Builder
	sink := func(d llm.Delta) {
		mu.Lock()
		got.WriteString(d.Text)
		mu.Unlock()
	}
	ctx := context.Background()
	rt := w.runtime(askThenGate(p, llm.Stream(sink)))
	id, _ := rt.Start(ctx, "ask", "q")
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = rt.Close()
	if got.String() != "streamed answer here" {
		t.Fatalf("deltas = %q", got.String())
	}
	for _, e := range w.events(id) {
		if strings.Contains(string(e.Payload), "delta") {
			t.Fatalf("a delta reached the log: %s %s", e.Type, e.Payload)
		}
	}
	got.Reset()
	rt2 := w.runtime(askThenGate(p, llm.Stream(sink)))
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt2.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got.Len() != 0 {
		t.Fatalf("a replayed call streamed %q", got.String())
	}
}

func TestFallbackRecordsTheMoveAndReplaysWithoutCallingEither(t *testing.T) {
	w := newWorld(t, nil)
	primary := llmtest.NewProvider(t, "anthropic")
	backup := llmtest.NewProvider(t, "openai")
	primary.Enqueue(llmtest.Reply{Fail: llm.KindUnavailable, Message: "overloaded"})
	backup.Enqueue(llmtest.Text("from the backup", 3, 3))
	cands := []llm.Candidate{{Provider: primary, Model: "claude-sonnet-4-5"}, {Provider: backup, Model: "gpt-4.1"}}
	flow := loom.NewFlow("fb", func(ctx *loom.Context, _ struct{}) (string, error) {
		resp, c, err := llm.Fallback(ctx, "model", cands, ask("hi"), nil, llm.WithRetry(middleware.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("go"); err != nil {
			return "", err
		}
		return c.String() + ": " + resp.Text, nil
	})
	_, res := w.parkThenResume(func() *loom.Flow { return flow }, nil)
	if string(res.Output) != `"openai/gpt-4.1: from the backup"` {
		t.Fatalf("result %s", res.Output)
	}
	if len(primary.Requests()) != 1 || len(backup.Requests()) != 1 {
		t.Fatalf("requests: primary %d, backup %d; want 1 each", len(primary.Requests()), len(backup.Requests()))
	}
	d, ok := res.State.Variables.Decisions["model/fallback:1"]
	if !ok || !strings.Contains(string(d.Choice), `"kind":"unavailable"`) {
		t.Fatalf("fallback decision = %+v", d)
	}
}

func TestRouteIsARecordedDecision(t *testing.T) {
	w := newWorld(t, nil)
	small, big := llmtest.NewProvider(t, "openai"), llmtest.NewProvider(t, "anthropic")
	big.Enqueue(llmtest.Text("deep answer", 1, 1))
	calls := 0
	flow := loom.NewFlow("route", func(ctx *loom.Context, q string) (string, error) {
		c, err := llm.Route(ctx, "router", []llm.Candidate{{Provider: small, Model: "gpt-4.1-mini"}, {Provider: big, Model: "claude-opus-4-1"}},
			ask(q), func(r llm.Request) (int, string) {
				calls++
				if len(r.Messages[0].Text) > 10 {
					return 1, "a long question"
				}
				return 0, "a short question"
			})
		if err != nil {
			return "", err
		}
		req := ask(q)
		req.Model = c.Model
		resp, err := llm.Complete(ctx, "model", c.Provider, req)
		return resp.Text, err
	})
	rt := w.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "route", "why is checkout slow?")
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"deep answer"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	var r llm.Routed
	if err := json.Unmarshal(res.State.Variables.Decisions["router"].Choice, &r); err != nil || r.Model != "claude-opus-4-1" || r.Reason != "a long question" {
		t.Fatalf("routing decision = %+v (%v)", r, err)
	}
	if calls != 1 || len(small.Requests()) != 0 {
		t.Fatalf("rule calls %d, small model requests %d", calls, len(small.Requests()))
	}
}

// unplugged is a provider that must never be called.
type unplugged struct{ t *testing.T }

func (u unplugged) Name() string { return "anthropic" }
func (u unplugged) Complete(context.Context, llm.Request, func(llm.Delta)) (llm.Response, error) {
	u.t.Error("the provider was called during a replay")
	return llm.Response{}, errors.New("unplugged")
}

func TestAForkReplaysTheRecordedCallWithTheProviderUnplugged(t *testing.T) {
	w := newWorld(t, nil)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Text("recorded", 1, 1))
	ctx := context.Background()
	rt := w.runtime(askThenGate(p))
	id, _ := rt.Start(ctx, "ask", "q")
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Close()
	rt2 := w.runtime(askThenGate(unplugged{t}))
	fork, err := rt2.Fork(ctx, id, st.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt2.Resume(ctx, fork, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, fork)
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != `"recorded"` {
		t.Fatalf("fork result %s %s, %v", res.Status, res.Output, err)
	}
}
