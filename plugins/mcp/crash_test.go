package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/mcp"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The crash matrix over an agent run on MCP tools: echo and add in one
// turn (a Parallel block), the isError tool in the next, then the answer;
// killed after every append and recovered in a fresh runtime with a fresh
// MCP connection.

const crashID = "mcp-crash"

var crashTurns = []llmtest.Reply{
	llmtest.Calls(100, 20, "srv_echo", `{"text":"hi"}`, "srv_add", `{"a":2,"b":3}`),
	llmtest.Calls(200, 20, "srv_fail", `{}`),
	llmtest.Text("Echoed, added, and the disk is full.", 300, 20),
}

// crashSteps maps each tool step of the run to the tool it calls.
var crashSteps = map[string]string{"ops/turn:1/tool:0": "echo", "ops/turn:1/tool:1": "add", "ops/turn:2/tool:0": "fail"}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.UnixMilli(1_750_000_000_000) }

// crashProcess is one process: a runtime over stores with its own
// connection to the server at url and its own scripted model.
func crashProcess(t *testing.T, stores store.Set, url string, p llm.Provider) *loom.Runtime {
	t.Helper()
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: url})
	flow := agentFlow(p, mcp.AgentTools(sortedTools(t, c)), func(cfg *agent.Config) {
		cfg.CallOptions = []llm.CallOption{llm.WithMeter(middleware.Meter{Now: fixedClock{}.Now})}
	})
	return newRuntime(t, stores, []*loom.Flow{flow}, func(cfg *loom.Config) { cfg.Clock = fixedClock{} }, c)
}

// runUntil starts the run on rt and waits until it ends or fault dies.
func runUntil(ctx context.Context, rt *loom.Runtime, fault *crashtest.FaultStore, inner store.EventStore) error {
	if _, err := rt.Start(ctx, "agent", "check the box", loom.WithExecutionID(crashID)); err != nil && !fault.Dead() {
		return err
	}
	return crashtest.Follow(ctx, fault, inner, crashID, nil)
}

// outcomes lists the steps whose outcome (completed, or failed typed) a
// log holds: those replay serves and must never run again.
func outcomes(evs []event.Envelope) map[string]bool {
	done := map[string]bool{}
	for _, e := range evs {
		var p struct {
			StepID  string `json:"stepId"`
			Channel string `json:"channel"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		if e.Type == event.StepCompleted || e.Type == event.StepFailed && p.Channel != "" {
			done[p.StepID] = true
		}
	}
	return done
}

func TestAgentOnMCPCrashMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a liveness bound
	defer cancel()

	// The uncrashed reference.
	w := newWorld()
	url := serveHTTP(t, newServer(w, nil), w)
	refStores := memstore.NewSet()
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(crashTurns...)
	rt := crashProcess(t, store.Set{Events: refStores.Events, Snapshots: refStores.Snapshots}, url, p)
	if _, err := rt.Start(ctx, "agent", "check the box", loom.WithExecutionID(crashID)); err != nil {
		t.Fatal(err)
	}
	ref, err := rt.WaitForCompletion(ctx, crashID)
	if err != nil {
		t.Fatal(err)
	}
	refLog := readLog(t, refStores, crashID)
	if w.total() != 3 {
		t.Fatalf("the reference run made %d tool calls, want 3", w.total())
	}

	servedAll := 0 // cases whose log held every tool's outcome: the check bit
	for n := 1; n < len(refLog); n++ {
		t.Run(fmt.Sprintf("kill-after-%02d", n), func(t *testing.T) {
			w := newWorld()
			url := serveHTTP(t, newServer(w, nil), w)
			stores := memstore.NewSet()
			fault := crashtest.NewFaultStore(stores.Events)
			fault.KillAfter(n)
			pa := llmtest.NewProvider(nil, "anthropic")
			pa.Enqueue(crashTurns...)
			a := crashProcess(t, store.Set{Events: fault, Snapshots: stores.Snapshots}, url, pa)
			if err := runUntil(ctx, a, fault, stores.Events); err != nil {
				t.Fatalf("process A: %v", err)
			}
			_ = a.Close()
			crashed := readLog(t, stores, crashID)
			done := outcomes(crashed)
			all := true
			for step := range crashSteps { //loom:order-independent a conjunction
				all = all && done[step]
			}
			if all {
				servedAll++
			}
			inA := map[string]int{}
			for _, tool := range crashSteps { //loom:order-independent a copy
				inA[tool] = w.count(tool)
			}

			// Process B recovers; it is asked only for the turns the log lacks.
			first := 1
			for done[fmt.Sprintf("ops/turn:%d/model", first)] {
				first++
			}
			pb := llmtest.NewProvider(t, "anthropic")
			if first <= len(crashTurns) {
				pb.Enqueue(crashTurns[first-1:]...)
			}
			// No lease store: A's lease, under the fixed clock, would never
			// expire (as in agent/crash_test.go).
			b := crashProcess(t, store.Set{Events: stores.Events, Snapshots: stores.Snapshots}, url, pb)
			if _, err := b.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			if len(crashed) == 0 {
				if _, err := b.Start(ctx, "agent", "check the box", loom.WithExecutionID(crashID)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := b.WaitForCompletion(ctx, crashID)
			if err != nil {
				t.Fatal(err)
			}
			for step, tool := range crashSteps { //loom:order-independent each step on its own
				if done[step] && w.count(tool) != inA[tool] {
					t.Errorf("%s (%s) had a durable outcome before the crash and was called again", step, tool)
				}
				if w.count(tool) == 0 {
					t.Errorf("%s (%s) was never called", step, tool)
				}
			}
			if pb.Pending() != 0 {
				t.Errorf("process B left %d model turns unasked", pb.Pending())
			}
			if string(res.Output) != string(ref.Output) {
				t.Fatalf("the recovered result differs from the uncrashed run's:\n%s\n%s", res.Output, ref.Output)
			}
		})
	}
	if servedAll == 0 {
		t.Fatal("no case crashed after every tool's outcome was durable")
	}
}
