package main

// Golden histories of the incident flow (STYLE rule 12), kept beside the
// kernel's in testdata/histories as incident-*.json, in the same format
// and replayed by the same harness (internal/goldentest,
// testdata/histories/README.md): a start and gate answers, replayed by a
// fresh runtime, under the log-neutral options, and by a new process from
// every recorded park.
//
// Regenerate with: go test ./examples/incident/ -run Golden -update-histories

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/goldentest"
)

const goldenDir = "../../testdata/histories"

// goldenIncidentCase is one incident history and the script that records it.
type goldenIncidentCase struct {
	name        string
	description string
	input       Incident
	answers     []Approval // one per park, in order
}

var goldenIncidentCases = []goldenIncidentCase{
	{name: "incident-approved", input: Incident{Service: "checkout", Symptom: "p99 latency above 2s"},
		answers:     []Approval{{Approved: true, By: "ann"}},
		description: "the remediation flow: signals, three parallel diagnoses, the model's plan, a recorded decision and emit, the timed approval gate answered yes, the non-idempotent fix"},
	{name: "incident-rejected", input: Incident{Service: "checkout", Symptom: "p99 latency above 2s"},
		answers:     []Approval{{Approved: false, By: "bob", Reason: "change freeze"}},
		description: "the same incident rejected at the gate: the flow escalates instead of applying the fix"},
	{name: "incident-memory", input: Incident{Service: "search", Symptom: "memory climbing, pods OOM-killed"},
		answers:     []Approval{{Approved: true, By: "carol"}},
		description: "the memory scenario: the logs diagnosis wins and the plan is a restart"},
}

// script is what recording the case does: the start, then each answer.
func (c goldenIncidentCase) script() []goldentest.Action {
	script := []goldentest.Action{goldentest.StartWith(c.input)}
	for _, a := range c.answers {
		script = append(script, goldentest.Answer(approvalGate, a))
	}
	return script
}

func TestGoldenIncidentHistories(t *testing.T) {
	fx := &worldCounters{of: map[*goldentest.Env]*effectCounter{}}
	var names []string
	for _, c := range goldenIncidentCases {
		names = append(names, c.name)
		t.Run(c.name, func(t *testing.T) {
			if goldentest.Updating() {
				goldentest.Write(t, goldenDir, c.name, flowID, c.description, goldentest.Record(t, fx.flow, nil, c.name, c.script()))
			}
			h := goldentest.Load(t, goldenDir, c.name)
			if h.File.Flow != flowID || h.File.Description != c.description {
				t.Fatalf("%s holds flow %q, %q; the case says %q, %q: regenerate it if the change is intended",
					c.name, h.File.Flow, h.File.Description, flowID, c.description)
			}
			if err := goldentest.SameActions(h.Actions, c.script()); err != nil || h.ID != c.name {
				t.Fatalf("%v (execution %q): the case changed since %s was recorded; regenerate it if the change is intended", err, h.ID, c.name)
			}
			if last := h.Events[len(h.Events)-1]; last.Type != event.ExecutionCompleted {
				t.Fatalf("%s ends with %s, want %s: every incident is answered to its end", c.name, last.Type, event.ExecutionCompleted)
			}
			goldentest.CheckReplay(t, h, fx.flow, nil, goldentest.LogNeutral(nil, true), fx.check)
		})
	}
	goldentest.Claim(t, goldenDir, names, func(name string) bool { return strings.HasPrefix(name, "incident-") })
}

// worldCounters gives the incident flow of each golden world its own
// effectCounter: the flow reports to one (flow.go), not to the harness's
// Env, so the world's Env is the key it is found by again.
type worldCounters struct {
	mu sync.Mutex
	of map[*goldentest.Env]*effectCounter
}

func (w *worldCounters) counter(env *goldentest.Env) *effectCounter {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.of[env] == nil {
		w.of[env] = newEffectCounter()
	}
	return w.of[env]
}

// flow is the remediation flow of a golden world.
func (w *worldCounters) flow(env *goldentest.Env) *loom.Flow { return newRemediateFlow(w.counter(env)) }

// check asserts that each step's effect ran once per attempt the replayed
// part of the log records, and no simulation ran: the steps before the
// cut were served.
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
	for _, id := range stepOrder {
		if fx.runs(id) != attempts[id] || fx.simulations(id) != 0 {
			t.Errorf("%s: step %s ran %d times (%d simulated), the log records %d attempts", mode, id, fx.runs(id), fx.simulations(id), attempts[id])
		}
	}
}
