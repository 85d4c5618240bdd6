package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The crash matrix over an agent run: a three-turn triage (two tools in a
// Parallel block, then a fix behind an approval gate, then the answer)
// against the Anthropic fake server, killed after every append and
// recovered in a fresh runtime.

const crashID = "agent-crash"

// crashTurns are the model's answers, by turn.
var crashTurns = []llmtest.Reply{
	llmtest.Calls(120, 30, "read_logs", `{"service":"checkout"}`, "read_metrics", `{"service":"checkout"}`),
	llmtest.Calls(300, 25, "apply_fix", `{"service":"checkout","action":"rollback"}`),
	llmtest.Text("Rolled back checkout; p99 is recovering.", 400, 20),
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.UnixMilli(1_750_000_000_000) }

func fixedNow() time.Time { return time.UnixMilli(1_750_000_000_000) }

// crashRuntime is one process: the triage flow over stores, its model the
// fake server's provider.
func crashRuntime(t *testing.T, stores store.Set, p llm.Provider, w *runs) *loom.Runtime {
	t.Helper()
	flow := triageFlow(p, w, func(c *agent.Config) {
		c.CallOptions = []llm.CallOption{llm.WithMeter(middleware.Meter{Now: fixedNow})}
	})
	cfg := loom.Config{Storage: stores, Flows: []*loom.Flow{flow}, Durability: loom.StepDurable, Clock: fixedClock{}}
	cfg.Recovery.Disabled = true
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// approveIfParked answers the approval gate the state is parked on.
func approveIfParked(ctx context.Context, rt *loom.Runtime, st fold.State) error {
	if st.Status != fold.StatusSuspended || st.Variables.SuspendedOn == nil {
		return nil
	}
	gate := st.Variables.SuspendedOn.On
	if !strings.HasPrefix(gate, agent.GatePrefix) {
		return fmt.Errorf("parked on %q, want an approval gate", gate)
	}
	return rt.Resume(ctx, crashID, answer(gate, agent.Answer{Decision: agent.DecisionApprove, By: "ada"}))
}

// driveUntil runs the flow on rt, answering the gate, until it ends or
// fault dies.
func driveUntil(ctx context.Context, rt *loom.Runtime, fault *crashtest.FaultStore, inner store.EventStore) error {
	if _, err := rt.Start(ctx, "triage", "checkout is slow", loom.WithExecutionID(crashID)); err != nil {
		return err
	}
	return crashtest.Follow(ctx, fault, inner, crashID, func(st fold.State) error { return approveIfParked(ctx, rt, st) })
}

// modelTurnsDone lists which model turns a log completed.
func modelTurnsDone(evs []event.Envelope) map[int]bool {
	done := map[int]bool{}
	for _, e := range evs {
		if e.Type != event.StepCompleted {
			continue
		}
		var p struct {
			StepID string `json:"stepId"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		var turn int
		if _, err := fmt.Sscanf(p.StepID, "triage/turn:%d/model", &turn); err == nil && strings.HasSuffix(p.StepID, "/model") {
			done[turn] = true
		}
	}
	return done
}

func completedSteps(evs []event.Envelope) map[string]bool {
	done := map[string]bool{}
	for _, e := range evs {
		if e.Type == event.StepCompleted {
			var p struct {
				StepID string `json:"stepId"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			done[p.StepID] = true
		}
	}
	return done
}

// unansweredSpend is the tokens metered in log for steps the log has no
// outcome of.
func unansweredSpend(log []event.Envelope) float64 {
	done := completedSteps(log)
	total := 0.0
	for _, e := range log {
		if e.Type != event.ResourceMetered {
			continue
		}
		var m struct {
			StepID string  `json:"stepId"`
			Tokens float64 `json:"tokens"`
		}
		_ = json.Unmarshal(e.Payload, &m)
		if !done[m.StepID] {
			total += m.Tokens
		}
	}
	return total
}

func TestAgentCrashMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a liveness bound
	defer cancel()

	// The uncrashed reference.
	refStores := memstore.NewSet()
	srv := anthropictest.NewServer(t)
	srv.Enqueue(crashTurns...)
	rt := crashRuntime(t, store.Set{Events: refStores.Events, Snapshots: refStores.Snapshots}, srv.Provider(t, "sk-ref"), newRuns())
	fault := crashtest.NewFaultStore(refStores.Events)
	if err := driveUntil(ctx, rt, fault, refStores.Events); err != nil {
		t.Fatal(err)
	}
	ref, err := rt.WaitForCompletion(ctx, crashID)
	_ = rt.Close()
	if err != nil {
		t.Fatal(err)
	}
	refLog, _ := store.Read(ctx, refStores.Events, crashID)
	if len(srv.Requests()) != len(crashTurns) {
		t.Fatalf("the reference run made %d model requests, want %d", len(srv.Requests()), len(crashTurns))
	}

	for n := 1; n < len(refLog); n++ {
		t.Run(fmt.Sprintf("kill-after-%02d", n), func(t *testing.T) {
			stores := memstore.NewSet()
			w := newRuns()
			// Process A dies after n durable events.
			fault := crashtest.NewFaultStore(stores.Events)
			fault.KillAfter(n)
			srvA := anthropictest.NewServer(t)
			srvA.Enqueue(crashTurns...)
			a := crashRuntime(t, store.Set{Events: fault, Snapshots: stores.Snapshots}, srvA.Provider(t, "sk-a"), w)
			if err := driveUntil(ctx, a, fault, stores.Events); err != nil {
				t.Fatalf("process A: %v", err)
			}
			_ = a.Close()
			crashed, _ := store.Read(ctx, stores.Events, crashID)
			turnsDone, stepsDone := modelTurnsDone(crashed), completedSteps(crashed)
			ranInA := map[string]int{}
			for id, c := range w.n { //loom:order-independent a copy
				ranInA[id] = c
			}

			// Process B recovers: it may ask only for the turns the log lacks.
			first := 1
			for turnsDone[first] {
				first++
			}
			srvB := anthropictest.NewServer(t)
			if first <= len(crashTurns) {
				srvB.Enqueue(crashTurns[first-1:]...)
			}
			b := crashRuntime(t, store.Set{Events: stores.Events, Snapshots: stores.Snapshots}, srvB.Provider(t, "sk-b"), w)
			defer b.Close()
			if _, err := b.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			var res loom.Result
			for {
				st, err := b.WaitForSettled(ctx, crashID)
				if err != nil {
					t.Fatal(err)
				}
				if st.Status.Terminal() {
					res, err = b.WaitForCompletion(ctx, crashID)
					if err != nil {
						t.Fatal(err)
					}
					break
				}
				if err := approveIfParked(ctx, b, st); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := len(srvB.Requests()), len(crashTurns)-first+1; got != want {
				t.Fatalf("process B asked the model %d times, want %d (turns %d.. only)", got, want, first)
			}
			if rs := srvB.Requests(); len(rs) > 0 {
				if got, want := len(rs[0].Request.Messages), 2*first-1; got != want {
					t.Fatalf("B's first request carries %d messages, want %d (turn %d's)", got, want, first)
				}
			}
			for id := range stepsDone { //loom:order-independent each step on its own
				if w.get(id) != ranInA[id] {
					t.Errorf("tool step %s completed before the crash and ran again in B", id)
				}
			}
			for _, id := range []string{"triage/turn:1/tool:0", "triage/turn:1/tool:1", "triage/turn:2/tool:0"} {
				if w.get(id) == 0 {
					t.Errorf("tool step %s never ran", id)
				}
			}
			// A call whose spend was durable but not its answer was really
			// paid for twice: the state differs from the reference by
			// exactly that spend, and by nothing else.
			got, _ := crashtest.Normalize(res.State)
			refState, _ := crashtest.Normalize(ref.State)
			if extra := unansweredSpend(crashed); extra > 0 {
				r := got["variables"].(map[string]any)["_resources"].(map[string]any)
				tokens, _ := r["tokens"].(json.Number).Float64()
				r["tokens"] = json.Number(strconv.FormatFloat(tokens-extra, 'f', -1, 64))
				delete(r, "costUsd")
				delete(refState["variables"].(map[string]any)["_resources"].(map[string]any), "costUsd")
			}
			if d := crashtest.Diff(refState, got); d != "" {
				t.Fatalf("the recovered state differs from the uncrashed run's:\n%s", d)
			}
		})
	}
}
