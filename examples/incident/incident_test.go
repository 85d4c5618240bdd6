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
			"1. Started incident "+started[1],
			"Diagnosis ran as 3 parallel branches",
			"The model proposed (step model.propose, kind llm, tool model.scripted",
			`Recorded decision "remediation"`,
			"Parked at the approval gate (#15, waiting up to 24h); process "+started[2]+" exited while the execution was suspended.",
			"New process "+resumed[1]+" resumed it with approval by alice (#16). The 5 steps completed before the park were served from the log, not re-run",
			"process "+resumed[1]+" started only apply-fix, verify-recovery.",
			"Completed (#21): fixed; process "+resumed[1]+" exited.",
			"Verified: re-folding the 22 stored events gives byte-identical state (sha256:",
			"Fork at #15 (simulated): rejected → escalated; original: approved → fixed",
			"escalate (simulation)",
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
		if !strings.Contains(out, "Started incident inc-e2e") || !strings.Contains(out, "Parked at the approval gate (event #15)") {
			t.Fatalf("start:\n%s", out)
		}
		if out := mustRun(t, bin, "status", id, "-db", db); !strings.Contains(out, "Status: suspended at the approval gate") {
			t.Fatalf("status:\n%s", out)
		}
		parked := logLines(t, bin, db, id)

		_, errOut, code := runBinary(t, bin, "answer", id, `{"approved":"yes"}`, "-db", db)
		if code != 1 || !strings.Contains(errOut, "refused, nothing recorded") || !strings.Contains(errOut, "schema") {
			t.Fatalf("an answer off the schema: exit %d, stderr %s", code, errOut)
		}
		if n := logLines(t, bin, db, id); n != parked {
			t.Fatalf("a refused answer changed the log: %d → %d events", parked, n)
		}

		out = mustRun(t, bin, "approve", id, "-by", "carol", "-db", db)
		for _, want := range []string{
			"Resumed inc-e2e with approval by carol",
			"Served from the log, not invoked by this process: collect-signals, diagnose#logs, diagnose#metrics, diagnose#deploys, model.propose.",
			"Ran in this process: apply-fix, verify-recovery.",
			"Completed: fixed: approved by carol",
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("approve: missing %q in\n%s", want, out)
			}
		}
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
		if !strings.Contains(out, "Forked inc-e2e at #15 into inc-e2e-b (simulated") {
			t.Fatalf("fork:\n%s", out)
		}
		out = mustRun(t, bin, "reject", "inc-e2e-b", "-by", "erin", "-reason", "too risky", "-db", db)
		if !strings.Contains(out, `Completed: escalated: rejected by erin (too risky); would page sre-oncall`) {
			t.Fatalf("reject the fork:\n%s", out)
		}
		if out := mustRun(t, bin, "status", "inc-e2e-b", "-db", db); !strings.Contains(out, "Forked from inc-e2e at #15 (simulated)") {
			t.Fatalf("status of the fork:\n%s", out)
		}
		if n := logLines(t, bin, db, id); n != done {
			t.Fatalf("the fork changed its parent's log: %d → %d events", done, n)
		}
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
// runtime runs it to the gate, a second one (a "new process" with its own
// counters) is refused answers off the schema and then finishes it serving
// every earlier step from the log; a simulated fork answers the other way.
func TestRemediateFlowInProcess(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	events, snaps, timers := memstore.NewEventStore(), memstore.NewSnapshotStore(), memstore.NewTimerStore()
	open := func(fx *effectCounter) *loom.Runtime {
		rt, err := loom.New(loom.Config{Events: events, Snapshots: snaps, Branches: memstore.NewBranchRegistry(),
			Timers: timers, TimerPoll: -1,
			Flows: []*loom.Flow{newRemediateFlow(fx)}, Durability: loom.StepDurable})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	read := func(id string) []event.Envelope {
		evs, err := store.Read(ctx, events, id)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}

	first := newEffectCounter()
	rt := open(first)
	id, err := rt.Start(ctx, flowID, Incident{Service: "checkout", Symptom: "p99 latency"}, loom.WithExecutionID("inc-mem"))
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
	if on := parked.Variables.SuspendedOn; on == nil || on.On != approvalGate || on.WakeAt == nil {
		t.Fatalf("parked on %+v", on)
	}
	assertCounts(t, "first runtime", first, map[string]int{stepCollect: 1, stepLogs: 1, stepMetrics: 1, stepDeploys: 1, stepPropose: 1})

	second := newEffectCounter()
	rt = open(second)
	defer rt.Close()
	before := len(read(id))
	for _, bad := range []string{`{"approved":"yes"}`, `{"by":"ann"}`, `{"approved":true,"extra":1}`, `"yes"`, `null`} {
		err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: approvalGate, Payload: json.RawMessage(bad)})
		var ve *loom.ResumePayloadValidationError
		if !errors.As(err, &ve) || ve.Gate != approvalGate {
			t.Fatalf("answer %s: err = %v, want *loom.ResumePayloadValidationError", bad, err)
		}
		if n := len(read(id)); n != before {
			t.Fatalf("answer %s was refused but the log grew %d → %d", bad, before, n)
		}
	}
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: approvalGate, Payload: json.RawMessage(`{"approved":true,"by":"ann"}`)}); err != nil {
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
	if sum.Outcome != outcomeFixed || sum.DecidedBy != "ann" || sum.Plan.Variant != "rollback" || sum.Fix == nil || sum.Simulated {
		t.Fatalf("summary %+v", sum)
	}
	assertCounts(t, "second runtime", second, map[string]int{stepApply: 1, stepVerify: 1})

	log := read(id)
	starts := map[string]int{}
	emits := 0
	for _, e := range log {
		switch e.Type {
		case event.StepStarted:
			var p stepStarted
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			starts[p.StepID]++
		case emitProposed:
			emits++
		}
	}
	for _, step := range append(preGateSteps, stepApply, stepVerify) {
		if starts[step] != 1 {
			t.Errorf("step %s started %d times in the log, want once", step, starts[step])
		}
	}
	if emits != 1 {
		t.Errorf("incident.proposed emitted %d times, want once per execution", emits)
	}
	refolded, err := fold.Encode(fold.Fold(log))
	if err != nil {
		t.Fatal(err)
	}
	if loaded, err := fold.Encode(res.State); err != nil || !bytes.Equal(refolded, loaded) {
		t.Fatalf("re-folded state differs from the runtime's (%v)", err)
	}

	h := history{id: id, events: log}
	_, park, _ := h.park()
	forkID, err := rt.Fork(ctx, id, park.Sequence, loom.SimulateFork(), loom.ForkID("inc-mem-fork"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, forkID, loom.ResumeEvent{EventType: approvalGate, Payload: json.RawMessage(`{"approved":false,"by":"bo","reason":"freeze"}`)}); err != nil {
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
	if fsum.Outcome != outcomeEscalated || !fsum.Simulated || fsum.Escalation == nil || !fsum.Escalation.Simulated || fsum.Reason != "freeze" {
		t.Fatalf("fork summary %+v", fsum)
	}
	if second.runs(stepEscalate) != 0 || second.simulations(stepEscalate) != 1 || second.runs(stepApply) != 1 {
		t.Fatalf("the simulated fork acted for real: escalate %d real, %d simulated; apply-fix %d",
			second.runs(stepEscalate), second.simulations(stepEscalate), second.runs(stepApply))
	}
	if n := len(read(id)); n != len(log) {
		t.Fatalf("the fork changed its parent: %d → %d events", len(log), n)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestChooseRemediation pins the decision rule.
func TestChooseRemediation(t *testing.T) {
	for _, symptom := range []string{"p99 latency", "memory climbing"} {
		sig := scriptedSignals(Incident{Service: "svc", Symptom: symptom})
		ds := []Diagnosis{diagnoseLogs(sig), diagnoseMetrics(sig), diagnoseDeploys(sig)}
		c, err := chooseRemediation(ds, scriptedModel(ModelInput{Incident: Incident{Service: "svc"}, Diagnoses: ds}))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"p99 latency": "rollback", "memory climbing": "restart"}[symptom]
		if c.Plan.Variant != want {
			t.Errorf("%s: chose %s (%s), want %s", symptom, c.Plan.Variant, c.Rule, want)
		}
	}
	if _, err := chooseRemediation(nil, Proposal{}); err == nil {
		t.Error("a proposal without plans was accepted")
	}
}

func assertCounts(t *testing.T, who string, fx *effectCounter, want map[string]int) {
	t.Helper()
	for _, step := range stepOrder {
		if got := fx.runs(step); got != want[step] {
			t.Errorf("%s ran %s %d times, want %d", who, step, got, want[step])
		}
		if got := fx.simulations(step); got != 0 {
			t.Errorf("%s simulated %s %d times", who, step, got)
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

func build(dir string) (string, error) { return testbin.Build(dir, "./examples/incident", "incident") }

// runBinary runs the binary and returns its output and exit status.
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testbin.Run(t, 30*time.Second, testbin.Env(), bin, args...)
}

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
