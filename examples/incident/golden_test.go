package main

// Golden histories of the incident flow (STYLE rule 12), one per scenario
// of record.go, kept in testdata/histories as incident-*.json in the
// kernel's format (testdata/histories/README.md at the repository root)
// and replayed by the same harness (internal/goldentest): a start and the
// approver's answer (or the gate's timer), replayed by a fresh runtime,
// under the log-neutral options, and by a new process from every park. The
// planner's model is the committed cassette, so each history also pins the
// model's recorded answers: a new process at the approval gate must serve
// the turns before it from the log and never ask the cassette for them.
//
// Regenerate with: go test ./examples/incident/ -run Golden -update-histories

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/goldentest"
	"github.com/loom-kernel/loom/middleware"
)

// goldenDir holds the incident flow's golden histories.
const goldenDir = "testdata/histories"

// frozenMeter reads one instant, so a model call meters 0 ms in every run.
var frozenMeter = middleware.Meter{Now: func() time.Time { return time.Unix(0, 0) }}

// script is what recording scenario sc does: the start, then the answers
// it gives at the gates the committed cassette's planner parks on, or the
// gate's timer when it gives none.
func script(t *testing.T, sc scenario) []goldentest.Action {
	t.Helper()
	acts := []goldentest.Action{goldentest.StartWith(sc.input)}
	if sc.answer == nil {
		return append(acts, goldentest.FireTimer())
	}
	p, err := play(context.Background(), sc, committedModel(t), "script-"+sc.name)
	if err != nil {
		t.Fatal(err)
	}
	for i, gate := range p.gates {
		acts = append(acts, goldentest.Answer(gate, p.answers[i]))
	}
	return acts
}

func TestGoldenIncidentHistories(t *testing.T) {
	fx := &worldCounters{of: map[*goldentest.Env]*effectCounter{}, model: committedModel(t), runbooks: testRunbooks(t)}
	var names []string
	for _, sc := range scenarios {
		name := "incident-" + sc.name
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			acts := script(t, sc)
			if goldentest.Updating() {
				goldentest.Write(t, goldenDir, name, flowID, sc.description, goldentest.Record(t, fx.flow, fx.config, name, acts))
			}
			h := goldentest.Load(t, goldenDir, name)
			if h.File.Flow != flowID || h.File.Description != sc.description {
				t.Fatalf("%s holds flow %q, %q; the scenario says %q, %q: regenerate it if the change is intended",
					name, h.File.Flow, h.File.Description, flowID, sc.description)
			}
			if err := goldentest.SameActions(h.Actions, acts); err != nil || h.ID != name {
				t.Fatalf("%v (execution %q): the scenario changed since %s was recorded; regenerate it if the change is intended", err, h.ID, name)
			}
			if last := h.Events[len(h.Events)-1]; last.Type != event.ExecutionCompleted {
				t.Fatalf("%s ends with %s, want %s: every incident is answered to its end", name, last.Type, event.ExecutionCompleted)
			}
			goldentest.CheckReplay(t, h, fx.flow, fx.config, goldentest.LogNeutral(fx.config, true), fx.check)
		})
	}
	goldentest.Claim(t, goldenDir, names, func(string) bool { return true })
}

// worldCounters gives the incident flow of each golden world its own
// effectCounter: the flow reports to one (flow.go), not to the harness's
// Env, so the world's Env is the key it is found by again. Every world's
// planner looks runbooks up on one runbook server (its answers are a pure
// function of the arguments, so which server answers changes no byte).
type worldCounters struct {
	mu       sync.Mutex
	of       map[*goldentest.Env]*effectCounter
	model    model
	runbooks *runbooks
	// opened is the counter of the process the harness opened last: it
	// builds the flow (flow) and then applies the config (config), so the
	// effects config registers report to the same counter as the flow.
	opened *effectCounter
}

// counter is the effectCounter of env's world, made on first use.
func (w *worldCounters) counter(env *goldentest.Env) *effectCounter {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.of[env] == nil {
		w.of[env] = newEffectCounter()
	}
	return w.of[env]
}

// flow is the remediation flow of a golden world.
func (w *worldCounters) flow(env *goldentest.Env) *loom.Flow {
	fx := w.counter(env)
	w.mu.Lock()
	w.opened = fx
	w.mu.Unlock()
	return newRemediateFlow(fx, w.model, w.runbooks)
}

// config registers the runbook lookup's effect, reporting to the counter
// of the process being opened.
func (w *worldCounters) config(cfg *loom.Config) {
	w.mu.Lock()
	fx := w.opened
	w.mu.Unlock()
	reg, err := w.runbooks.effects(fx)
	if err != nil {
		panic(err) // mcp.invoke is a valid tool id: a wiring mistake
	}
	cfg.Effects = reg
}

// check asserts that each step — a tool call, a model call, a flow step —
// ran once per attempt the replayed part of the log records, and no
// simulation ran: the steps before the cut were served, and the cassette
// was asked only for the turns after it.
func (w *worldCounters) check(t testing.TB, mode string, tail []event.Envelope, env *goldentest.Env) {
	t.Helper()
	attempts := map[string]int{}
	for _, e := range tail {
		var p struct {
			StepID string `json:"stepId"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		if e.Type == event.StepStarted || e.Type == event.StepRetrying {
			attempts[p.StepID]++
		}
	}
	fx := w.counter(env)
	for _, id := range fx.steps() {
		if fx.simulations(id) != 0 {
			t.Errorf("%s: step %s ran %d simulations", mode, id, fx.simulations(id))
		}
	}
	for id, n := range attempts { //loom:order-independent each checked alone
		if fx.runs(id) != n {
			t.Errorf("%s: step %s ran %d times, the log records %d attempts", mode, id, fx.runs(id), n)
		}
	}
	for _, id := range fx.steps() {
		if attempts[id] == 0 && fx.runs(id) > 0 {
			t.Errorf("%s: step %s ran %d times, but the replayed part of the log records no attempt: it was served before", mode, id, fx.runs(id))
		}
	}
}

// committed is the committed cassette, opened once per test binary (a
// replaying cassette is safe for concurrent use).
var committed struct {
	once sync.Once
	m    model
	err  error
}

// committedModel is the planner's model of the demo: the committed
// cassette, replayed, metering 0 ms per call.
func committedModel(t testing.TB) model {
	t.Helper()
	committed.once.Do(func() {
		committed.m, committed.err = modelFlags{}.open()
		committed.m.meter = frozenMeter
	})
	if committed.err != nil {
		t.Fatal(committed.err)
	}
	return committed.m
}
