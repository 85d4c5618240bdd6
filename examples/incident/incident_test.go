package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// TestEndToEnd builds the real binary and runs it as a user would: the demo
// (which itself runs start and approve as child processes), then the same
// story by hand, one process per command.
func TestEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()

	t.Run("demo", func(t *testing.T) {
		db := filepath.Join(dir, "incident.db")
		out, errOut, code := runBinary(t, bin, "demo", "-db", db)
		if code != 0 {
			t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		started := regexp.MustCompile(`(?m)^1\. Started incident (inc-[0-9a-f]{8}) for checkout: p99 latency above 2s \(process (\d+)\)\.$`).FindStringSubmatch(out)
		resumed := regexp.MustCompile(`(?m)^\d+\. New process (\d+) resumed it with approval by alice`).FindStringSubmatch(out)
		if started == nil || resumed == nil {
			t.Fatalf("no start or resume line:\n%s", out)
		}
		if started[2] == resumed[1] {
			t.Fatalf("start and resume ran in the same process %s", started[2])
		}
		inOrder(t, out,
			"The planner's model: llm:scripted/incident-planner-1, replaying testdata/cassettes/planner.json (committed, embedded in this binary), recorded from scripted: offline",
			"1. Started incident "+started[1],
			"Collected signals (step collect-signals, before the agent)",
			`The planner (agent "planner") asked its model, turn 1 (step planner/turn:1/model, llm:scripted/incident-planner-1)`,
			"It called 3 tools in that one turn, run as 3 parallel branches:",
			"Turn 2 (step planner/turn:2/model", "and for the team's runbook (over MCP).", "It called 2 tools in that one turn, run as 2 parallel branches:", "propose_fix",
			`runbooks_lookup   {"service":"checkout","cause":"deploy"} → runbook RB-101 "Latency after a deploy", 4 steps, applies rollback (over MCP: tool id mcp.invoke:runbooks/lookup)`,
			"Turn 3 (step planner/turn:3/model", "the fix runbook RB-101 (Latency after a deploy) prescribes.",
			`apply_fix         {"service":"checkout","variant":"rollback"} — needs approval: not run yet`,
			"Recorded agent.approval.requested (#25) for call planner/turn:3/tool:0",
			"Only an answer naming its gate, approve.apply_fix:",
			"Parked at that gate (#27, waiting up to 24h); process "+started[2]+" exited while the execution was suspended.",
			"New process "+resumed[1]+" resumed it with approval by alice (#28). The 9 steps recorded before the park",
			"process "+resumed[1]+" started only planner/turn:3/tool:0, planner/turn:4/model, verify-recovery.",
			"The runbook lookup (step planner/turn:2/tool:1, mcp.invoke:runbooks/lookup) went through MCP once: process "+started[2]+
				"'s runbook server answered 1 lookup; process "+resumed[1]+" started its own server, and it answered 0 — the recorded call was served from the log.",
			"Applied the fix (tool apply_fix, step planner/turn:3/tool:0",
			"Turn 4 (step planner/turn:4/model",
			"Completed (#38): fixed; process "+resumed[1]+" exited. 39 events in the log; the planner ran llm:scripted/incident-planner-1 in 4 model turns.",
			"Verified: re-folding the 39 stored events gives byte-identical state (sha256:",
			"Fork at #27 (simulated): rejected → escalated; original: approved → fixed",
			"planner turn 4 (model), escalate (simulation)",
		)
		if strings.Contains(out, "✗") {
			t.Fatalf("a check of the story failed:\n%s", out)
		}
		// The demo starts from a fresh file, so it runs again on the same path.
		if out, errOut, code := runBinary(t, bin, "demo", "-db", db); code != 0 {
			t.Fatalf("second demo exited %d\n%s\n%s", code, out, errOut)
		}
	})

	t.Run("by hand", func(t *testing.T) {
		db := filepath.Join(dir, "manual.db")
		id := "inc-e2e"
		out := mustRun(t, bin, "start", "-db", db, "-id", id)
		inOrder(t, out, "Started incident inc-e2e",
			"Ran in this process: collect-signals, planner turn 1 (model, tool:0, tool:1, tool:2), planner turn 2 (model, tool:0, tool:1), planner turn 3 (model).",
			"Model calls this process made: 3.",
			"Runbook lookups this process's MCP server answered: 1 (tool mcp.invoke:runbooks/lookup).",
			`The planner asks to run: apply_fix {"service":"checkout","variant":"rollback"} → roll back checkout from v2.14.0 to v2.13.2 (low risk) (call planner/turn:3/tool:0, digest sha256:`,
			"Parked at its approval gate approve.apply_fix:", "(event #27)")
		out = mustRun(t, bin, "status", id, "-db", db)
		inOrder(t, out, "Status: suspended at approval gate approve.apply_fix:", "Planner: agent \"planner\" on llm:scripted/incident-planner-1",
			`Waiting for approval: apply_fix {"service":"checkout","variant":"rollback"} → roll back checkout`, "-digest sha256:")
		parked := logLines(t, bin, db, id)

		for _, bad := range [][]string{
			{"answer", id, `{"decision":"yes"}`},
			{"answer", id, `{"decision":"edit","arguments":{"service":"checkout","variant":"teleport"}}`},
		} {
			_, errOut, code := runBinary(t, bin, append(bad, "-db", db)...)
			if code != 1 || !strings.Contains(errOut, "refused, nothing recorded") || !strings.Contains(errOut, "schema") {
				t.Fatalf("an answer off the schema: exit %d, stderr %s", code, errOut)
			}
		}
		stale := "sha256:" + strings.Repeat("0", 64)
		_, errOut, code := runBinary(t, bin, "approve", id, "-digest", stale, "-db", db)
		if code != 1 || !strings.Contains(errOut, "refused, nothing recorded: the answer names gate approve.apply_fix:000") ||
			!strings.Contains(errOut, "the call you reviewed is not the pending one") {
			t.Fatalf("an approval of a stale digest: exit %d, stderr %s", code, errOut)
		}
		if n := logLines(t, bin, db, id); n != parked {
			t.Fatalf("a refused answer changed the log: %d → %d events", parked, n)
		}

		out = mustRun(t, bin, "approve", id, "-by", "carol", "-db", db)
		inOrder(t, out,
			`Pending call: apply_fix {"service":"checkout","variant":"rollback"}`,
			"Resumed inc-e2e with approval by carol at gate approve.apply_fix:",
			"Served from the log, not invoked by this process: collect-signals, planner turn 1 (model, tool:0, tool:1, tool:2), planner turn 2 (model, tool:0, tool:1), planner turn 3 (model).",
			"Ran in this process: planner turn 3 (tool:0), planner turn 4 (model), verify-recovery.",
			"Model calls this process made: 1 (replaying testdata/cassettes/planner.json",
			"Runbook lookups this process's MCP server answered: 0 (tool mcp.invoke:runbooks/lookup).",
			"Completed: fixed: approved by carol; applied: roll back checkout from v2.14.0 to v2.13.2 (change chg-")
		done := logLines(t, bin, db, id)
		for _, again := range [][]string{{"approve", id, "-by", "dave"}, {"reject", id, "-reason", "late"}} {
			_, errOut, code := runBinary(t, bin, append(again, "-db", db)...)
			if code != 1 || !strings.Contains(errOut, "refused, nothing recorded: inc-e2e was already answered") ||
				!strings.Contains(errOut, "fork it at the gate") {
				t.Fatalf("%s after the answer: exit %d, stderr %s", again[0], code, errOut)
			}
		}
		if n := logLines(t, bin, db, id); n != done {
			t.Fatalf("a refused second answer changed the log: %d → %d events", done, n)
		}
		if out := mustRun(t, bin, "verify", id, "-db", db); !strings.Contains(out, "gives byte-identical state (sha256:") {
			t.Fatalf("verify:\n%s", out)
		}

		out = mustRun(t, bin, "fork", id, "-id", "inc-e2e-b", "-db", db)
		if !strings.Contains(out, "Forked inc-e2e at #27 into inc-e2e-b (simulated") {
			t.Fatalf("fork:\n%s", out)
		}
		out = mustRun(t, bin, "reject", "inc-e2e-b", "-by", "erin", "-reason", "too risky", "-db", db)
		if !strings.Contains(out, `Completed: escalated: rejected by erin (too risky); would page sre-oncall`) {
			t.Fatalf("reject the fork:\n%s", out)
		}
		if out := mustRun(t, bin, "status", "inc-e2e-b", "-db", db); !strings.Contains(out, "Forked from inc-e2e at #27 (simulated)") {
			t.Fatalf("status of the fork:\n%s", out)
		}
		if n := logLines(t, bin, db, id); n != done {
			t.Fatalf("the fork changed its parent's log: %d → %d events", done, n)
		}

		mustRun(t, bin, "start", "-db", db, "-id", "inc-edit", "-q")
		out = mustRun(t, bin, "approve", "inc-edit", "-by", "fay", "-variant", "scale-out", "-db", db)
		inOrder(t, out, "Resumed inc-edit with approval of an edited call by fay",
			"Completed: fixed: approved with an edit by fay; applied: double the checkout connection pool and add 2 replicas")
	})

	t.Run("usage and failures", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			says string
		}{
			{nil, 2, "usage: incident <command>"},
			{[]string{"bogus"}, 2, `unknown command "bogus"`},
			{[]string{"approve"}, 2, "usage: incident approve <id>"},
			{[]string{"start", "-service", ""}, 2, "must not be empty"},
			{[]string{"start", "-provider", "bogus", "-db", filepath.Join(dir, "bogus.db")}, 2, `-provider "bogus": want anthropic, openai, gemini or scripted`},
			{[]string{"status", "inc-x", "-db", filepath.Join(dir, "missing.db")}, 1, "no database at"},
			{[]string{"status", "inc-x", "-db", filepath.Join(dir, "manual.db")}, 1, `no execution "inc-x"`},
		} {
			_, errOut, code := runBinary(t, bin, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.says) {
				t.Errorf("incident %v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.says)
			}
		}
	})
}

// TestRemediateFlowInProcess drives the flow over memory stores: a first
// runtime runs it to the approval gate, a second one (a "new process" with
// its own counters) is refused answers off the schema and an answer for a
// stale digest, then finishes it serving every earlier step and model turn
// from the log; a simulated fork answers the other way.
func TestRemediateFlowInProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events, snaps, timers := memstore.NewEventStore(), memstore.NewSnapshotStore(), memstore.NewTimerStore()
	// Each "process" has a runbook server of its own, closed (before the
	// leak check) when the test returns.
	var servers []*runbooks
	defer func() {
		for _, rb := range servers {
			if err := rb.close(); err != nil {
				t.Error(err)
			}
		}
	}()
	open := func(fx *effectCounter) *loom.Runtime {
		cfg, rb := process(t, loom.Config{Events: events, Snapshots: snaps, Branches: memstore.NewBranchRegistry(),
			Timers: timers, TimerPoll: -1, Durability: loom.StepDurable}, fx, committedModel(t))
		servers = append(servers, rb)
		rt, err := loom.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	read := func(id string) history {
		evs, err := store.Read(ctx, events, id)
		if err != nil {
			t.Fatal(err)
		}
		return history{id: id, events: evs}
	}

	first := newEffectCounter()
	rt := open(first)
	id, err := rt.Start(ctx, flowID, checkoutIncident, loom.WithExecutionID("inc-mem"))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	req, ok := read(id).pending(parked)
	if on := parked.Variables.SuspendedOn; !ok || on.WakeAt == nil || req.Tool != toolApply || req.StepID != applyStep {
		t.Fatalf("parked on %+v, pending %+v", on, req)
	}
	assertCounts(t, "first runtime", first, map[string]int{stepCollect: 1,
		modelStepID(1): 1, "planner/turn:1/tool:0": 1, "planner/turn:1/tool:1": 1, "planner/turn:1/tool:2": 1,
		modelStepID(2): 1, "planner/turn:2/tool:0": 1, lookupStep: 1, modelStepID(3): 1})

	second := newEffectCounter()
	rt = open(second)
	defer rt.Close()
	before := len(read(id).events)
	for _, bad := range []string{`{"decision":"yes"}`, `{"by":"ann"}`, `{"decision":"approve","extra":1}`, `"yes"`, `null`,
		`{"decision":"approve","arguments":{"service":"checkout","variant":"rollback"}}`, `{"decision":"edit"}`,
		`{"decision":"edit","arguments":{"service":"checkout","variant":"teleport"}}`} {
		err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: req.Gate, Payload: json.RawMessage(bad)})
		var ve *loom.ResumePayloadValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("answer %s: err = %v, want *loom.ResumePayloadValidationError", bad, err)
		}
		if n := len(read(id).events); n != before {
			t.Fatalf("answer %s was refused but the log grew %d → %d", bad, before, n)
		}
	}
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: req.Gate, Payload: json.RawMessage(`{"decision":"approve","by":"ann"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var sum Summary
	if err := json.Unmarshal(res.Output, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Outcome != outcomeFixed || sum.DecidedBy != "ann" || sum.Plan == nil || sum.Plan.Variant != "rollback" || sum.Fix == nil ||
		sum.Simulated || sum.Planner.Turns != 4 || sum.Planner.Stop != agent.StopEnd || sum.Planner.Call != applyStep {
		t.Fatalf("summary %+v", sum)
	}
	assertCounts(t, "second runtime", second, map[string]int{applyStep: 1, modelStepID(4): 1, stepVerify: 1})

	h := read(id)
	starts := map[string]int{}
	requests := 0
	for _, e := range h.events {
		switch e.Type {
		case event.StepStarted:
			var p stepStarted
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			starts[p.StepID]++
		case agent.ApprovalRequestEvent:
			requests++
		}
	}
	for step, n := range starts { //loom:order-independent each checked alone
		if n != 1 {
			t.Errorf("step %s started %d times in the log, want once", step, n)
		}
	}
	if len(starts) != 12 || requests != 1 {
		t.Errorf("%d steps started (want 12), %d approval requests (want 1)", len(starts), requests)
	}
	refolded, err := fold.Encode(fold.Fold(h.events))
	if err != nil {
		t.Fatal(err)
	}
	if loaded, err := fold.Encode(res.State); err != nil || !bytes.Equal(refolded, loaded) {
		t.Fatalf("re-folded state differs from the runtime's (%v)", err)
	}

	_, park, _ := h.park()
	forkID, err := rt.Fork(ctx, id, park.Sequence, loom.SimulateFork(), loom.ForkID("inc-mem-fork"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, forkID); err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, forkID, loom.ResumeEvent{EventType: req.Gate, Payload: json.RawMessage(`{"decision":"reject","by":"bo","reason":"freeze"}`)}); err != nil {
		t.Fatal(err)
	}
	fres, err := rt.WaitForCompletion(ctx, forkID)
	if err != nil {
		t.Fatal(err)
	}
	var fsum Summary
	if err := json.Unmarshal(fres.Output, &fsum); err != nil {
		t.Fatal(err)
	}
	if fsum.Outcome != outcomeEscalated || !fsum.Simulated || fsum.Escalation == nil || !fsum.Escalation.Simulated || fsum.Reason != "freeze" ||
		fsum.Planner.Note != "" || fsum.Planner.Turns != 4 {
		t.Fatalf("fork summary %+v", fsum)
	}
	// The fork asked the model for its own turn 4 (a model call is
	// read-only, so a what-if asks for real); it acted on nothing.
	if second.runs(stepEscalate) != 0 || second.simulations(stepEscalate) != 1 || second.runs(applyStep) != 1 || second.runs(modelStepID(4)) != 2 {
		t.Fatalf("the simulated fork acted for real: escalate %d real, %d simulated; apply_fix %d; turn 4 asked %d times",
			second.runs(stepEscalate), second.simulations(stepEscalate), second.runs(applyStep), second.runs(modelStepID(4)))
	}
	if n := len(read(id).events); n != len(h.events) {
		t.Fatalf("the fork changed its parent: %d → %d events", len(h.events), n)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}

// applyStep is the step of the planner's apply_fix call in every scenario.
const applyStep = "planner/turn:3/tool:0"

// assertCounts asserts that fx ran exactly the steps of want, each as often,
// and simulated none.
func assertCounts(t *testing.T, who string, fx *effectCounter, want map[string]int) {
	t.Helper()
	for _, step := range fx.steps() {
		if _, ok := want[step]; !ok {
			t.Errorf("%s ran %s %d times, want none", who, step, fx.runs(step))
		}
		if got := fx.simulations(step); got != 0 {
			t.Errorf("%s simulated %s %d times", who, step, got)
		}
	}
	for step, n := range want { //loom:order-independent each checked alone
		if got := fx.runs(step); got != n {
			t.Errorf("%s ran %s %d times, want %d", who, step, got, n)
		}
	}
}

// built is the binary buildBinary built, once per test binary.
var built struct {
	once sync.Once
	bin  string
	err  error
}

// buildBinary builds this command once per test binary, into a temporary
// directory removed when the tests end. Under -race the binary is built with
// -race too: it then reuses the packages the test binary was just compiled
// from (only linking is left), and the child processes of the demo run under
// the race detector as well.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = build(binDir) })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// binDir holds the built binary; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "incident-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir) // a temporary directory: nothing to report if it lingers
	os.Exit(code)
}

// build builds this command into dir.
func build(dir string) (string, error) { return testbin.Build(dir, "./examples/incident", "incident") }

// runBinary runs the binary and returns its output and exit status.
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testbin.Run(t, 30*time.Second, testbin.Env(), bin, args...)
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return testbin.Must(t, 30*time.Second, testbin.Env(), bin, args...)
}

// logLines counts the stored events of id, through the log command.
func logLines(t *testing.T, bin, db, id string) int {
	t.Helper()
	return strings.Count(mustRun(t, bin, "log", id, "-db", db), "\n")
}

// inOrder asserts that out contains every part, in order.
func inOrder(t *testing.T, out string, parts ...string) {
	t.Helper()
	rest := out
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Fatalf("missing (or out of order) %q in:\n%s", p, out)
		}
		rest = rest[i+len(p):]
	}
}
