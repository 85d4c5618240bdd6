package main

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
)

// testRunbooks starts a runbook server for one "process" of a test,
// closed when the test ends (a test may close it earlier).
func testRunbooks(t testing.TB) *runbooks {
	t.Helper()
	rb, err := startRunbooks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rb.close(); err != nil {
			t.Error(err)
		}
	})
	return rb
}

// process wires cfg as one process: the remediation flow over m reporting
// to fx, with a runbook server of its own, which it returns.
func process(t testing.TB, cfg loom.Config, fx *effectCounter, m model) (loom.Config, *runbooks) {
	t.Helper()
	rb := testRunbooks(t)
	if err := rb.wire(&cfg, fx, m); err != nil {
		t.Fatal(err)
	}
	return cfg, rb
}

// lookupStep is the step of the planner's runbook lookup in every
// scenario: the second call of turn 2, beside propose_fix.
const lookupStep = "planner/turn:2/tool:1"

// TestRunbookServer: the runbook server lists one tool, lookup, which the
// planner calls runbooks_lookup under the tool id
// mcp.invoke:runbooks/lookup, and whose answer is a pure function of its
// arguments — the same from two servers, and counted by the one asked.
func TestRunbookServer(t *testing.T) {
	a, b := testRunbooks(t), testRunbooks(t)
	if len(a.tools) != 1 || a.tools[0].ID() != runbookToolID || runbookToolName != "runbooks_lookup" || runbookToolID != "mcp.invoke:runbooks/lookup" {
		t.Fatalf("the runbook server lists %+v; the model name is %q, the tool id %q", a.tools, runbookToolName, runbookToolID)
	}
	if a.tools[0].SchemaHash != b.tools[0].SchemaHash {
		t.Fatalf("two servers pin different schemas: %s, %s", a.tools[0].SchemaHash, b.tools[0].SchemaHash)
	}
	ctx := testContext(t)
	args := json.RawMessage(`{"service":"checkout","cause":"deploy"}`)
	var answers [2]Runbook
	for i, rb := range []*runbooks{a, b} {
		res, err := rb.client.Session().CallTool(ctx, &sdk.CallToolParams{Name: runbookTool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &answers[i]); err != nil {
			t.Fatal(err)
		}
	}
	if want := runbookFor("checkout", "deploy"); !reflect.DeepEqual(answers[0], want) || !reflect.DeepEqual(answers[1], want) {
		t.Fatalf("the servers answered %+v and %+v, want %+v", answers[0], answers[1], want)
	}
	if a.answered() != 1 || b.answered() != 1 {
		t.Fatalf("the servers counted %d and %d lookups, want 1 each", a.answered(), b.answered())
	}
}

// TestResumeServesTheRecordedLookup: the process that starts an incident
// looks the runbook up through MCP once; a new process, with a runbook
// server of its own, answers the gate and finishes the incident without
// calling its server: the recorded lookup is served from the log, as the
// step's effect never runs there.
func TestResumeServesTheRecordedLookup(t *testing.T) {
	ctx := testContext(t)
	w := newMemWorld(t)
	req := w.parkAt(ctx, "inc-lookup")
	if got := w.lastRunbooks.answered(); got != 1 {
		t.Fatalf("the first process's runbook server answered %d lookups, want 1", got)
	}
	if p, _, ok := w.history("inc-lookup").stepStart(lookupStep); !ok || p.ToolID != runbookToolID {
		t.Fatalf("step %s was recorded as %+v, want tool id %s", lookupStep, p, runbookToolID)
	}
	fx := newEffectCounter()
	rt := w.open(committedModel(t), fx)
	if err := rt.Resume(ctx, "inc-lookup", loom.ResumeEvent{EventType: req.Gate, Payload: mustJSON(agent.Answer{Decision: agent.DecisionApprove, By: "ann"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, "inc-lookup"); err != nil {
		t.Fatal(err)
	}
	if got := w.lastRunbooks.answered(); got != 0 {
		t.Fatalf("the resuming process's runbook server answered %d lookups, want 0: the recorded lookup ran again", got)
	}
	assertCounts(t, "the resuming process", fx, map[string]int{applyStep: 1, modelStepID(4): 1, stepVerify: 1})
	var rb Runbook
	if err := w.history("inc-lookup").output(lookupStep, &rb); err != nil || rb.ID != "RB-101" || rb.Variant != "rollback" {
		t.Fatalf("the recorded lookup answered %+v (%v)", rb, err)
	}
}
