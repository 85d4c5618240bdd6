package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/goldentest"
	"github.com/loom-kernel/loom/loomtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// checkFlow is a flow of steps named by ids, then a gate, then a last step
// "c"; output is the steps' outputs joined. Each step's effect counts its
// runs in runs.
type checkFlow struct {
	steps   []string // the steps before the gate, in order
	gate    string
	suffix  string // appended to the output
	options []loom.FlowOption
}

func (f checkFlow) build(runs *atomic.Int64) *loom.Flow {
	step := func(id string) *loom.Step[string, string] {
		return loom.NewStep(id, func(_ context.Context, in string) (string, error) {
			runs.Add(1)
			return in + "+" + id, nil
		})
	}
	return loom.NewFlow("order", func(ctx *loom.Context, in string) (string, error) {
		out := in
		for _, id := range f.steps {
			var err error
			if out, err = loom.Run(ctx, step(id), out); err != nil {
				return "", err
			}
		}
		if _, err := ctx.Suspend(f.gate); err != nil {
			return "", err
		}
		out, err := loom.Run(ctx, step("c"), out)
		return out + f.suffix, err
	}, f.options...)
}

var baseCheckFlow = checkFlow{steps: []string{"a", "b"}, gate: "g"}

// recordCheckLogs runs the base flow to its park and to its end and
// returns both logs.
func recordCheckLogs(t *testing.T) (parked, completed []event.Envelope) {
	t.Helper()
	var runs atomic.Int64
	env := loomtest.New(t, loomtest.WithFlows(baseCheckFlow.build(&runs)))
	id := env.Start(t, "order", "x")
	env.WaitForGate(t, id, "g")
	parked = env.Log(t, id)
	env.Answer(t, id, "g", nil)
	env.WaitForCompletion(t, id)
	return parked, env.Log(t, id)
}

// checkRuntime is a runtime for checks: the candidate flows on empty
// memory stores.
func checkRuntime(t *testing.T, events store.EventStore, flows ...*loom.Flow) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: events, Timers: memstore.NewTimerStore(), TimerPoll: -1,
		Flows: flows, StickyParks: -1, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func seqOf(log []event.Envelope, typ string, match func(map[string]any) bool) int64 {
	for _, e := range log {
		var p map[string]any
		_ = json.Unmarshal(e.Payload, &p)
		if e.Type == typ && (match == nil || match(p)) {
			return e.Sequence
		}
	}
	return -1
}

func stepStarted(id string) func(map[string]any) bool {
	return func(p map[string]any) bool { return p["stepId"] == id }
}

// Each candidate change is reported exactly: the verdict, the sequence
// where the candidate parts from the log, what the log has there and what
// the candidate does instead, and the code path — and nothing runs.
func TestCheckReplayReportsEachKindOfChangeExactly(t *testing.T) {
	parked, completed := recordCheckLogs(t)
	suspendSeq := seqOf(parked, event.ExecutionSuspended, nil)
	seqA, seqB := seqOf(parked, event.StepStarted, stepStarted("a")), seqOf(parked, event.StepStarted, stepStarted("b"))
	endSeq := completed[len(completed)-1].Sequence
	for _, c := range []struct {
		name      string
		candidate checkFlow
		log       []event.Envelope
		verdict   loom.ReplayVerdict
		seq       int64 // -1: none
		expected  string
		got       string
	}{
		{"unchanged, parked", baseCheckFlow, parked, loom.ReplayCompatible, -1, "", ""},
		{"unchanged, ended", baseCheckFlow, completed, loom.ReplayCompatible, -1, "", ""},
		{"renamed step", checkFlow{steps: []string{"a", "b2"}, gate: "g"}, parked, loom.ReplayDiverged,
			seqB, `step "b"`, `step "b2"`},
		{"reordered steps", checkFlow{steps: []string{"b", "a"}, gate: "g"}, parked, loom.ReplayDiverged,
			seqA, `step "a"`, `step "b"`},
		{"a new step before the gate", checkFlow{steps: []string{"a", "b", "n"}, gate: "g"}, parked, loom.ReplayDiverged,
			suspendSeq, `a park on gate "g"`, `step "n"`},
		{"a removed step", checkFlow{steps: []string{"a"}, gate: "g"}, parked, loom.ReplayDiverged,
			seqB, `step "b"`, `a park on gate "g"`},
		{"another gate", checkFlow{steps: []string{"a", "b"}, gate: "h"}, parked, loom.ReplayParksDifferently,
			suspendSeq, `a park on gate "g"`, `a park on gate "h"`},
		{"another output", checkFlow{steps: []string{"a", "b"}, gate: "g", suffix: "!"}, completed, loom.ReplayDiverged,
			endSeq, `completion with output "x+a+b+c"`, `completion with output "x+a+b+c!"`},
		{"a code pin", checkFlow{steps: []string{"a", "b"}, gate: "g", options: []loom.FlowOption{loom.WithCodeFingerprint("v2")}},
			parked, loom.ReplayPinMismatch, -1, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var runs atomic.Int64
			events := memstore.NewEventStore()
			rt := checkRuntime(t, events, c.candidate.build(&runs))
			rep := rt.CheckReplay(context.Background(), c.log)
			t.Log(rep)
			if rep.Verdict != c.verdict || rep.ExecutionID != c.log[0].ExecutionID || rep.FlowID != "order" {
				t.Fatalf("verdict %s, want %s: %s", rep.Verdict, c.verdict, rep)
			}
			if c.seq >= 0 {
				if rep.Sequence == nil || *rep.Sequence != c.seq || rep.Expected != c.expected || rep.Got != c.got {
					t.Fatalf("parts at %v: expected %q got %q; want %d, %q, %q", rep.Sequence, rep.Expected, rep.Got, c.seq, c.expected, c.got)
				}
			} else if rep.Sequence != nil {
				t.Fatalf("parts at %d: %s", *rep.Sequence, rep)
			}
			if c.verdict == loom.ReplayDiverged && c.log[len(c.log)-1].Type != event.ExecutionCompleted &&
				!strings.Contains(rep.Path, "replaycheck_test.go") {
				t.Fatalf("code path %q does not name the flow's code", rep.Path)
			}
			if c.verdict == loom.ReplayPinMismatch && !strings.Contains(rep.Detail, "otherwise it replays compatibly") {
				t.Fatalf("detail %q", rep.Detail)
			}
			if n := runs.Load(); n != 0 {
				t.Fatalf("the check ran %d steps", n)
			}
			page, err := events.ListExecutions(context.Background(), "", 10)
			if err != nil || len(page.Executions) != 0 {
				t.Fatalf("the check wrote: %v %v", page.Executions, err)
			}
		})
	}
}

func TestCheckReplayRefusesWhatItCannotJudge(t *testing.T) {
	parked, _ := recordCheckLogs(t)
	var runs atomic.Int64
	other := loom.NewFlow("other", func(*loom.Context, struct{}) (int, error) { runs.Add(1); return 0, nil })
	rt := checkRuntime(t, memstore.NewEventStore(), other)
	if rep := rt.CheckReplay(context.Background(), parked); rep.Verdict != loom.ReplayUnknownFlow ||
		!strings.Contains(rep.Detail, "registered flows: other") {
		t.Fatalf("unknown flow: %s", rep)
	}
	if rep := rt.CheckReplay(context.Background(), nil); rep.Verdict != loom.ReplayUnreadable {
		t.Fatalf("empty log: %s", rep)
	}
	gap := append(append([]event.Envelope(nil), parked[:1]...), parked[2:]...)
	if rep := rt.CheckReplay(context.Background(), gap); rep.Verdict != loom.ReplayUnreadable {
		t.Fatalf("a log with a gap: %s", rep)
	}
	if runs.Load() != 0 {
		t.Fatal("a flow ran")
	}
}

// Every golden history is compatible with today's code — its whole log
// and its prefix at every park — except the bad ones, recorded under an
// older flow, which are reported incompatible.
func TestGoldenHistoriesPassCheckReplay(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			h := goldentest.Load(t, historyDir, c.name)
			env := goldentest.NewEnv()
			cfg := loom.Config{Events: memstore.NewEventStore(), Timers: memstore.NewTimerStore(), TimerPoll: -1,
				Flows: env.Flows(c.flow(env)), StickyParks: -1, Recovery: loom.Recovery{Disabled: true}}
			if c.config != nil {
				c.config(&cfg)
			}
			rt, err := loom.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			prefixes := [][]event.Envelope{h.Events}
			for i, e := range h.Events {
				if e.Type == event.ExecutionSuspended {
					prefixes = append(prefixes, h.Events[:i+1])
				}
			}
			bad := c.recordedWith != nil
			incompatible := 0
			for _, log := range prefixes {
				rep := rt.CheckReplay(context.Background(), log)
				if !rep.Compatible() {
					incompatible++
					if !bad {
						t.Errorf("%d events: %s", len(log), rep)
					}
				}
			}
			if bad && incompatible == 0 {
				t.Fatalf("no prefix of a history recorded under older code was reported incompatible")
			}
			if got := env.Effects(); len(got) != 0 {
				t.Fatalf("the checks ran effects: %s", got)
			}
		})
	}
}

// TestCheckReplayServesALogPastAHandledUntypedFailure: a step fails with
// an untyped error, the flow handles it and goes on to another step and a
// gate. A resume runs the failed step again (an untyped failure is no
// outcome replay serves), so the check stops there and says so: the
// steps the log holds after it are not "removed" (they were a false
// divergence once).
func TestCheckReplayServesALogPastAHandledUntypedFailure(t *testing.T) {
	var runs atomic.Int64
	build := func() *loom.Flow {
		flaky := loom.NewStep("flaky", func(context.Context, string) (string, error) {
			runs.Add(1)
			return "", errors.New("upstream timed out")
		})
		after := loom.NewStep("after", func(_ context.Context, in string) (string, error) { runs.Add(1); return in + "!", nil })
		return loom.NewFlow("handles", func(ctx *loom.Context, in string) (string, error) {
			if _, err := loom.Run(ctx, flaky, in); err == nil {
				return "", errors.New("flaky succeeded")
			}
			out, err := loom.Run(ctx, after, in)
			if err != nil {
				return "", err
			}
			if _, err := ctx.Suspend("g"); err != nil {
				return "", err
			}
			return out, nil
		})
	}
	env := loomtest.New(t, loomtest.WithFlows(build()))
	id := env.Start(t, "handles", "x")
	env.WaitForGate(t, id, "g")
	parked := env.Log(t, id)
	env.Answer(t, id, "g", nil)
	env.WaitForCompletion(t, id)
	completed := env.Log(t, id)

	runs.Store(0)
	rt := checkRuntime(t, memstore.NewEventStore(), build())
	for _, log := range [][]event.Envelope{parked, completed} {
		rep := rt.CheckReplay(context.Background(), log)
		if !rep.Compatible() || !strings.Contains(rep.Detail, `step "flaky"`) {
			t.Errorf("%d events: %s", len(log), rep)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("the check ran %d steps", runs.Load())
	}
}
