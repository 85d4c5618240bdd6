package middleware_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
)

// spend is an effect that takes d on clk and reports u.
func spend(clk *clock, d time.Duration, u *middleware.Usage) effect.Func {
	return func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		clk.Advance(d)
		if u != nil {
			if err := middleware.Report(ec, *u); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`"done"`), nil
	}
}

// threeSteps runs a, b and c in order, each error kept, and then parks.
func threeSteps(errs *[3]atomic.Value) *loom.Flow {
	return loom.NewFlow("three", func(ctx *loom.Context, _ struct{}) (string, error) {
		for i, id := range []string{"a", "b", "c"} {
			_, err := ctx.Execute(&loom.Task{ID: id, ToolID: id}, nil)
			errs[i].Store(errBox{err})
		}
		_, err := loom.Suspend[bool](ctx, "go")
		return "end", err
	})
}

type errBox struct{ err error }

// Allow: every effect is metered once with its elapsed ms, and only the
// dimensions it reported — no false zeros in the fact or the fold.
func TestMeteringRecordsMsAndOnlyReportedDimensions(t *testing.T) {
	clk := newClock()
	a := &counted{fn: spend(clk, 7*time.Millisecond, &middleware.Usage{Tokens: middleware.Amount(1200),
		CostUSD: middleware.Amount(0.03), Custom: map[string]float64{"gpuSeconds": 2}})}
	b := &counted{fn: spend(clk, 3500*time.Microsecond, nil)}
	c := &counted{fn: spend(clk, 0, &middleware.Usage{NetBytes: middleware.Amount(0)})}
	var errs [3]atomic.Value
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"a": a.Func, "b": b.Func, "c": c.Func}),
		Middleware: []effect.Middleware{middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{})}},
		threeSteps(&errs))
	r.start("three", "m", nil)
	st := r.parked("m")
	want := []string{
		`{"stepId":"a","attempt":1,"ms":7,"tokens":1200,"costUsd":0.03,"custom":{"gpuSeconds":2}}`,
		`{"stepId":"b","attempt":1,"ms":3.5}`,
		`{"stepId":"c","attempt":1,"ms":0,"netBytes":0}`,
	}
	if got := r.payloads("m", event.ResourceMetered); !reflect.DeepEqual(got, want) {
		t.Fatalf("RESOURCE_METERED\n got %v\nwant %v", got, want)
	}
	res := st.Variables.Resources
	if res == nil || *res.Tokens != 1200 || *res.Ms != 10.5 || *res.NetBytes != 0 || res.Custom["gpuSeconds"] != 2 {
		t.Fatalf("resources %+v", res)
	}
	if res.MemBytes != nil || res.WallMs != nil {
		t.Fatalf("an unmeasured dimension was folded: %+v", res)
	}
	// Replay: the completed steps are served, nothing is metered again.
	calls := a.n.Load() + b.n.Load() + c.n.Load()
	before := len(r.payloads("m", event.ResourceMetered))
	r.resume("m")
	if a.n.Load()+b.n.Load()+c.n.Load() != calls || len(r.payloads("m", event.ResourceMetered)) != before {
		t.Fatal("the replay re-invoked an effect or metered again")
	}
}

// Deny: the effect that crosses the budget runs and is metered; the next
// one is refused before it runs, with QUOTA_EXCEEDED recorded.
func TestMeteringBudgetDeniesTheEffectAfterTheOneThatCrossedIt(t *testing.T) {
	clk := newClock()
	u := &middleware.Usage{Tokens: middleware.Amount(600)}
	a, b, c := &counted{fn: spend(clk, time.Millisecond, u)}, &counted{fn: spend(clk, time.Millisecond, u)},
		&counted{fn: spend(clk, time.Millisecond, u)}
	var errs [3]atomic.Value
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"a": a.Func, "b": b.Func, "c": c.Func}),
		Middleware: []effect.Middleware{middleware.Metering(middleware.Meter{Now: clk.Now},
			middleware.Budget{Tokens: 1000})}}, threeSteps(&errs))
	r.start("three", "q", nil)
	st := r.parked("q")
	if a.n.Load() != 1 || b.n.Load() != 1 || c.n.Load() != 0 {
		t.Fatalf("calls a=%d b=%d c=%d: b crosses the budget and runs, c is denied", a.n.Load(), b.n.Load(), c.n.Load())
	}
	want := []string{`{"stepId":"c","dimension":"tokens","limit":1000,"used":1200,"reason":"tokens budget 1000 reached (1200 used)"}`}
	if got := r.payloads("q", event.QuotaExceeded); !reflect.DeepEqual(got, want) {
		t.Fatalf("QUOTA_EXCEEDED\n got %v\nwant %v", got, want)
	}
	var qe *middleware.QuotaExceededError
	if err := errs[2].Load().(errBox).err; !errors.As(err, &qe) || qe.Dimension != "tokens" || qe.Used != 1200 {
		t.Fatalf("c's error %v", err)
	}
	if q := st.Variables.Quota; q == nil || q.Dimension != "tokens" {
		t.Fatalf("folded quota %+v", q)
	}
	if n := len(r.payloads("q", event.ResourceMetered)); n != 2 {
		t.Fatalf("%d RESOURCE_METERED, want 2 (a denied attempt spends nothing)", n)
	}
}

// Under Retry, every attempt is metered and admitted on the running total,
// including what earlier attempts of the same step spent.
func TestMeteringUnderRetryAdmitsEachAttemptOnTheRunningTotal(t *testing.T) {
	clk := newClock()
	var calls atomic.Int64
	failing := func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		calls.Add(1)
		if err := middleware.Report(ec, middleware.Usage{Tokens: middleware.Amount(60)}); err != nil {
			return nil, err
		}
		return nil, errors.New("model overloaded")
	}
	flow, o := gatedFlow("llm", &loom.Task{ID: "ask", ToolID: "llm"}, nil)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"llm": failing}),
		Middleware: []effect.Middleware{
			middleware.Retry(middleware.RetryPolicy{MaxAttempts: 5, Sleep: (&sleeps{}).Sleep}),
			middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{Tokens: 100}),
		}}, flow)
	r.start("llm", "r", nil)
	r.parked("r")
	if calls.Load() != 2 {
		t.Fatalf("%d calls: attempt 2 runs (60 < 100), attempt 3 is denied (120)", calls.Load())
	}
	wantMetered := []string{`{"stepId":"ask","attempt":1,"ms":0,"tokens":60}`, `{"stepId":"ask","attempt":2,"ms":0,"tokens":60}`}
	if got := r.payloads("r", event.ResourceMetered); !reflect.DeepEqual(got, wantMetered) {
		t.Fatalf("RESOURCE_METERED %v", got)
	}
	if got := r.payloads("r", event.QuotaExceeded); len(got) != 1 {
		t.Fatalf("QUOTA_EXCEEDED %v", got)
	}
	var qe *middleware.QuotaExceededError
	if _, err := o.get(); !errors.As(err, &qe) || qe.Used != 120 {
		t.Fatalf("step error %v", err)
	}
}

// Custom dimensions are capped like the standard ones.
func TestMeteringCapsCustomDimensions(t *testing.T) {
	clk := newClock()
	u := &middleware.Usage{Custom: map[string]float64{"gpuSeconds": 5}}
	a, b := &counted{fn: spend(clk, 0, u)}, &counted{fn: spend(clk, 0, u)}
	c := &counted{fn: spend(clk, 0, u)}
	var errs [3]atomic.Value
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"a": a.Func, "b": b.Func, "c": c.Func}),
		Middleware: []effect.Middleware{middleware.Metering(middleware.Meter{Now: clk.Now},
			middleware.Budget{Custom: map[string]float64{"gpuSeconds": 5}})}}, threeSteps(&errs))
	r.start("three", "g", nil)
	r.parked("g")
	if a.n.Load() != 1 || b.n.Load() != 0 || c.n.Load() != 0 {
		t.Fatalf("calls a=%d b=%d c=%d", a.n.Load(), b.n.Load(), c.n.Load())
	}
	if got := r.payloads("g", event.QuotaExceeded); len(got) != 2 || got[0] !=
		`{"stepId":"b","dimension":"custom:gpuSeconds","limit":5,"used":5,"reason":"custom:gpuSeconds budget 5 reached (5 used)"}` {
		t.Fatalf("QUOTA_EXCEEDED %v", got)
	}
}

func TestReportRefusesInvalidAmountsAndIsANoOpUnmetered(t *testing.T) {
	for name, u := range map[string]middleware.Usage{
		"negative":   {Tokens: middleware.Amount(-1)},
		"NaN":        {CostUSD: middleware.Amount(math.NaN())},
		"infinite":   {WallMs: middleware.Amount(math.Inf(1))},
		"ceiling":    {MemBytes: middleware.Amount(2e15)},
		"empty name": {Custom: map[string]float64{"": 1}},
		"proto":      {Custom: map[string]float64{"__proto__": 1}},
	} {
		var ue *middleware.UsageError
		if err := middleware.Report(nil, u); !errors.As(err, &ue) {
			t.Errorf("%s: Report = %v, want *UsageError", name, err)
		}
	}
	// Outside a Metering ring a valid report records nothing and succeeds.
	var seen atomic.Value
	flow, _ := gatedFlow("plain", &loom.Task{ID: "s", ToolID: "s"}, nil)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{
		"s": func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			seen.Store(errBox{middleware.Report(ec, middleware.Usage{Tokens: middleware.Amount(5)})})
			return nil, nil
		}})}, flow)
	r.start("plain", "p", nil)
	r.parked("p")
	if err := seen.Load().(errBox).err; err != nil || len(r.payloads("p", event.ResourceMetered)) != 0 {
		t.Fatalf("unmetered Report: %v, facts %v", err, r.payloads("p", event.ResourceMetered))
	}
}

// Report is safe from the effect's own goroutines, and amounts add up.
func TestReportFromConcurrentGoroutinesAddsUp(t *testing.T) {
	clk := newClock()
	fan := func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { _ = middleware.Report(ec, middleware.Usage{Tokens: middleware.Amount(1)}) })
		}
		wg.Wait()
		return nil, nil
	}
	flow, _ := gatedFlow("fan", &loom.Task{ID: "fan", ToolID: "fan"}, nil)
	r := newRig(t, loom.Config{Effects: registry(t, map[string]effect.Func{"fan": fan}),
		Middleware: []effect.Middleware{middleware.Metering(middleware.Meter{Now: clk.Now}, middleware.Budget{})}}, flow)
	r.start("fan", "f", nil)
	r.parked("f")
	if got := r.payloads("f", event.ResourceMetered); len(got) != 1 || got[0] != `{"stepId":"fan","attempt":1,"ms":0,"tokens":8}` {
		t.Fatalf("RESOURCE_METERED %v", got)
	}
}

// Without a Meter.Now, Metering times an effect on the runtime's clock
// (Config.Clock): a test's injected clock governs the recorded ms.
func TestMeteringDefaultsToTheRuntimesClock(t *testing.T) {
	clk := newClock()
	slow := func(*effect.Context, json.RawMessage) (json.RawMessage, error) {
		clk.Advance(1500 * time.Millisecond)
		return json.RawMessage(`"ok"`), nil
	}
	flow, _ := gatedFlow("slow", &loom.Task{ID: "work", ToolID: "slow"}, nil)
	r := newRig(t, loom.Config{Clock: clk, Effects: registry(t, map[string]effect.Func{"slow": slow}),
		Middleware: []effect.Middleware{middleware.Metering(middleware.Meter{}, middleware.Budget{})}}, flow)
	r.start("slow", "x", nil)
	r.parked("x")
	if got := r.payloads("x", event.ResourceMetered); len(got) != 1 || got[0] != `{"stepId":"work","attempt":1,"ms":1500}` {
		t.Fatalf("RESOURCE_METERED = %v", got)
	}
}
