package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// askCounter wraps the planner's provider and records every request it is
// asked, with the model step that asked: what a process really asked the
// cassette, as opposed to what the log served.
type askCounter struct {
	llm.Provider
	mu    sync.Mutex
	steps []string
	reqs  []llm.Request
}

// Complete implements llm.Provider.
func (a *askCounter) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	step := ""
	if ec := loom.EffectContext(ctx); ec != nil {
		step = ec.StepID
	}
	a.mu.Lock()
	a.steps, a.reqs = append(a.steps, step), append(a.reqs, req)
	a.mu.Unlock()
	return a.Provider.Complete(ctx, req, sink)
}

// asked lists the model steps that asked the provider, in order.
func (a *askCounter) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.steps)
}

// counted is the committed cassette behind a fresh askCounter.
func counted(t *testing.T) (model, *askCounter) {
	m := committedModel(t)
	a := &askCounter{Provider: m.provider}
	m.provider = a
	return m, a
}

// memWorld is a set of memory stores that several runtimes ("processes")
// open in turn, each with a runbook server of its own.
type memWorld struct {
	t      *testing.T
	events *memstore.EventStore
	snaps  *memstore.SnapshotStore
	timers *memstore.TimerStore
	// lastRunbooks is the runbook server of the process opened last.
	lastRunbooks *runbooks
}

// newMemWorld returns empty memory stores.
func newMemWorld(t *testing.T) *memWorld {
	return &memWorld{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), timers: memstore.NewTimerStore()}
}

// open is a new process over the world, planning with m and starting a
// runbook server of its own (w.lastRunbooks).
func (w *memWorld) open(m model, fx *effectCounter) *loom.Runtime {
	cfg, rb := process(w.t, loom.Config{Events: w.events, Snapshots: w.snaps, Branches: memstore.NewBranchRegistry(),
		Timers: w.timers, TimerPoll: -1, Durability: loom.StepDurable}, fx, m)
	w.lastRunbooks = rb
	rt, err := loom.New(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = rt.Close() }) // closed again by the test; a second Close is a no-op
	return rt
}

// history reads the log of id.
func (w *memWorld) history(id string) history {
	evs, err := store.Read(context.Background(), w.events, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return history{id: id, events: evs}
}

// parkAt starts the checkout incident in a first process, waits for its
// approval gate and stops the process; it returns the pending call.
func (w *memWorld) parkAt(ctx context.Context, id string) agent.ApprovalRequest {
	w.t.Helper()
	m, asked := counted(w.t)
	rt := w.open(m, newEffectCounter())
	if _, err := rt.Start(ctx, flowID, checkoutIncident, loom.WithExecutionID(id)); err != nil {
		w.t.Fatal(err)
	}
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		w.t.Fatal(err)
	}
	if got, want := asked.asked(), []string{modelStepID(1), modelStepID(2), modelStepID(3)}; !slices.Equal(got, want) {
		w.t.Fatalf("the first process asked the cassette for %v, want %v", got, want)
	}
	req, ok := w.history(id).pending(st)
	if !ok {
		w.t.Fatalf("not parked on an approval gate: %+v", st.Variables.SuspendedOn)
	}
	return req
}

// testContext bounds a test's waits (a bound on a hang, not pacing).
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestDemoMakesNoLiveCall: the default model is the committed cassette in
// Replay mode — no provider behind it, so nothing can be asked live — and
// the demo, with every API key removed and every HTTP request sent to a
// dead proxy, still runs to its end, each child process reporting the
// model calls the cassette answered.
func TestDemoMakesNoLiveCall(t *testing.T) {
	m, err := modelFlags{}.open()
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := m.provider.(replayed); !ok || r.Name() != scriptedProvider || m.name != scriptedModelName {
		t.Fatalf("the default planner model is %T %q %q, want the committed cassette recorded from the scripted model", m.provider, m.provider.Name(), m.name)
	}
	bin := buildBinary(t)
	env := append(testbin.Env("ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "GEMINI_API_KEY=", "HTTP_PROXY=", "HTTPS_PROXY="),
		"HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1")
	out, errOut, code := testbin.Run(t, 60*time.Second, env, bin, "demo", "-v", "-db", filepath.Join(t.TempDir(), "offline.db"))
	if code != 0 || strings.Contains(out, "✗") {
		t.Fatalf("the offline demo exited %d\n%s\n%s", code, out, errOut)
	}
	inOrder(t, out, "│ Model calls this process made: 3.", "│ Model calls this process made: 1 (replaying testdata/cassettes/planner.json")
}

// TestResumeServesRecordedTurns: a new process that answers the gate
// replays the agent loop from the top, is served turns 1–3 from the log and
// asks the cassette only for turn 4.
func TestResumeServesRecordedTurns(t *testing.T) {
	ctx := testContext(t)
	w := newMemWorld(t)
	req := w.parkAt(ctx, "inc-resume")
	m, asked := counted(t)
	rt := w.open(m, newEffectCounter())
	if err := rt.Resume(ctx, "inc-resume", loom.ResumeEvent{EventType: req.Gate, Payload: mustJSON(agent.Answer{Decision: agent.DecisionApprove, By: "ann"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, "inc-resume"); err != nil {
		t.Fatal(err)
	}
	if got := asked.asked(); !slices.Equal(got, []string{modelStepID(4)}) {
		t.Fatalf("the resuming process asked the cassette for %v, want only turn 4", got)
	}
}

// TestRecoveryServesRecordedTurns: a process dies while the planner is
// mid-run (propose_fix answered, its outcome never durable); the process
// that recovers the execution is served every model turn the log holds and
// asks the cassette only for the turns it does not.
func TestRecoveryServesRecordedTurns(t *testing.T) {
	ctx := testContext(t)
	db := filepath.Join(t.TempDir(), "incident.db")
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	dying := &dyingEvents{EventStore: st.Events.(*sqlite.EventStore), dieAfter: "planner/turn:2/tool:0"}
	cfg, _ := process(t, loom.Config{Events: dying, Snapshots: st.Snapshots, Branches: st.Branches, Timers: st.Timers, TimerPoll: -1,
		Durability: loom.StepDurable, Clock: &dayAgo{}, Recovery: loom.Recovery{Disabled: true}}, newEffectCounter(), committedModel(t))
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Start(ctx, flowID, checkoutIncident, loom.WithExecutionID("inc-crash")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSettled(ctx, "inc-crash"); err == nil {
		t.Fatal("the dying process settled the incident")
	}
	_ = rt.Close() // the journal failed: Close reports it
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	h := history{id: "inc-crash", events: readLogFile(t, db, "inc-crash")}
	var recorded []string
	for turn := 1; turn <= 3; turn++ {
		if _, _, ok := h.modelTurn(turn); ok {
			recorded = append(recorded, modelStepID(turn))
		}
	}
	if !slices.Equal(recorded, []string{modelStepID(1), modelStepID(2)}) {
		t.Fatalf("the dying process left model turns %v durable, want turns 1 and 2", recorded)
	}

	st, err = sqlite.Storage(sqlite.StorageOptions{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	m, asked := counted(t)
	fx := newEffectCounter()
	cfg, _ = process(t, loom.Config{Events: st.Events, Snapshots: st.Snapshots, Branches: st.Branches, Timers: st.Timers, TimerPoll: -1,
		Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}}, fx, m)
	rt, err = loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	parked, err := rt.WaitForSuspend(ctx, "inc-crash")
	if err != nil || !isApprovalGate(parked.Variables.SuspendedOn.On) {
		t.Fatalf("the recovered incident is not at its approval gate: %+v %v", parked.Variables.SuspendedOn, err)
	}
	if got := asked.asked(); !slices.Equal(got, []string{modelStepID(3)}) {
		t.Fatalf("the recovering process asked the cassette for %v, want only turn 3", got)
	}
	for _, served := range []string{stepCollect, "planner/turn:1/tool:0", "planner/turn:1/tool:1", "planner/turn:1/tool:2"} {
		if fx.runs(served) != 0 {
			t.Errorf("the recovering process re-ran %s, which the log holds", served)
		}
	}
	if fx.runs("planner/turn:2/tool:0") != 1 {
		t.Errorf("propose_fix, whose outcome died with the process, ran %d times on recovery, want 1", fx.runs("planner/turn:2/tool:0"))
	}
}

// TestStaleDigestIsRefused: an answer for another call than the pending
// one — other arguments (a screen that showed an older proposal), another
// step — names another gate and is refused with nothing appended; the
// pending call's gate is then answered as usual.
func TestStaleDigestIsRefused(t *testing.T) {
	ctx := testContext(t)
	w := newMemWorld(t)
	req := w.parkAt(ctx, "inc-stale")
	rt := w.open(committedModel(t), newEffectCounter())
	before := len(w.history("inc-stale").events)
	yes := mustJSON(agent.Answer{Decision: agent.DecisionApprove, By: "ann"})
	for _, call := range []struct{ step, args string }{
		{req.StepID, `{"service":"checkout","variant":"scale-out"}`},
		{"planner/turn:2/tool:0", string(req.Arguments)},
	} {
		digest, err := agent.CallDigest(plannerID, call.step, toolApply, json.RawMessage(call.args))
		if err != nil {
			t.Fatal(err)
		}
		if digest == req.Digest {
			t.Fatalf("the stale call %+v has the pending call's digest", call)
		}
		err = rt.Resume(ctx, "inc-stale", loom.ResumeEvent{EventType: agent.GateFor(toolApply, digest), Payload: yes})
		var rr *loom.ResumeRefusedError
		if !errors.As(err, &rr) || rr.Reason != loom.RefusedGateMismatch {
			t.Fatalf("an approval of stale call %+v: err = %v, want a gate mismatch", call, err)
		}
		if n := len(w.history("inc-stale").events); n != before {
			t.Fatalf("a refused approval appended %d events", n-before)
		}
	}
	if err := rt.Resume(ctx, "inc-stale", loom.ResumeEvent{EventType: req.Gate, Payload: yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, "inc-stale"); err != nil {
		t.Fatal(err)
	}
}

// TestRejectFeedsTheModelAndEscalates: a rejected apply_fix never runs;
// the model's next turn is asked with the rejection (and its reason) as the
// call's error result, it answers without a fix, and the flow escalates
// with the approver's reason.
func TestRejectFeedsTheModelAndEscalates(t *testing.T) {
	ctx := testContext(t)
	w := newMemWorld(t)
	req := w.parkAt(ctx, "inc-no")
	m, asked := counted(t)
	fx := newEffectCounter()
	rt := w.open(m, fx)
	no := agent.Answer{Decision: agent.DecisionReject, By: "bob", Reason: "change freeze"}
	if err := rt.Resume(ctx, "inc-no", loom.ResumeEvent{EventType: req.Gate, Payload: mustJSON(no)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, "inc-no")
	if err != nil {
		t.Fatal(err)
	}
	if fx.runs(applyStep) != 0 || fx.runs(stepEscalate) != 1 || fx.runs(stepVerify) != 0 {
		t.Fatalf("after a rejection: apply_fix ran %d, escalate %d, verify %d times", fx.runs(applyStep), fx.runs(stepEscalate), fx.runs(stepVerify))
	}
	if len(asked.reqs) != 1 {
		t.Fatalf("the cassette was asked %d times after the rejection, want once (turn 4)", len(asked.reqs))
	}
	msgs := asked.reqs[0].Messages
	last := msgs[len(msgs)-1]
	if last.Role != llm.RoleTool || len(last.ToolResults) != 1 || last.ToolResults[0].Name != toolApply || !last.ToolResults[0].IsError ||
		!strings.Contains(last.ToolResults[0].Content, "rejected by its approver: change freeze") {
		t.Fatalf("turn 4 was not told of the rejection: %+v", last)
	}
	var sum Summary
	if err := json.Unmarshal(res.Output, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Outcome != outcomeEscalated || sum.Reason != "change freeze" || sum.DecidedBy != "bob" || sum.Escalation == nil ||
		sum.Escalation.Simulated || sum.Fix != nil || sum.Planner.Decision != agent.DecisionReject || sum.Planner.Stop != agent.StopEnd ||
		!strings.HasPrefix(sum.Planner.Answer, "The fix was not approved") {
		t.Fatalf("summary %+v", sum)
	}
	var turn agent.TurnRecord
	for _, e := range w.history("inc-no").events {
		if e.Type == agent.TurnEvent && json.Unmarshal(e.Payload, &turn) == nil && turn.Turn == 3 {
			break
		}
	}
	if c := turn.ToolCalls; len(c) != 1 || c[0].Status != agent.StatusRejected || c[0].Approval == nil || c[0].Approval.By != "bob" {
		t.Fatalf("turn 3's tool-call log: %+v", turn)
	}
}
