package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// dyingEvents is the event log of a process that dies just after step
// dieAfter acted: the append of its outcome, and every one after it, never
// happens. What is durable is what a kill -9 at that moment leaves.
type dyingEvents struct {
	*sqlite.EventStore
	dieAfter string
	dead     atomic.Bool
}

// errDied is what the dying event log answers every append with.
var errDied = errors.New("the process died")

// check kills the process at the outcome of dieAfter, and refuses
// every append from then on.
func (d *dyingEvents) check(evs []event.Envelope) error {
	for _, e := range evs {
		var p struct {
			StepID string `json:"stepId"`
		}
		if e.Type == event.StepCompleted && json.Unmarshal(e.Payload, &p) == nil && p.StepID == d.dieAfter {
			d.dead.Store(true)
		}
	}
	if d.dead.Load() {
		return errDied
	}
	return nil
}

// Append implements store.EventStore, unless the process died.
func (d *dyingEvents) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if err := d.check(evs); err != nil {
		return err
	}
	return d.EventStore.Append(ctx, id, expected, evs)
}

// AppendFenced implements the fenced append, unless the process died.
func (d *dyingEvents) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	if err := d.check(evs); err != nil {
		return err
	}
	return d.EventStore.AppendFenced(ctx, id, token, expected, evs)
}

// dayAgo is a clock a day in the past, so what the dying process records
// is not "recent activity" to the processes that come after it.
type dayAgo struct{ mu sync.Mutex }

// Now is a day before the wall clock.
func (c *dayAgo) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(-24 * time.Hour)
}

// parkInDoubt leaves incident id in db parked in doubt about the apply_fix
// call: a process approves it and dies after the fix acted, before its
// outcome is durable; a later one recovers it, and parks rather than act
// twice.
func parkInDoubt(t *testing.T, db, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	dying := &dyingEvents{EventStore: st.Events.(*sqlite.EventStore), dieAfter: applyStep}
	cfg, _ := process(t, loom.Config{Events: dying, Snapshots: st.Snapshots, Branches: st.Branches, Timers: st.Timers, TimerPoll: -1,
		Durability: loom.StepDurable, Clock: &dayAgo{}, Recovery: loom.Recovery{Disabled: true}}, newEffectCounter(), committedModel(t))
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Start(ctx, flowID, Incident{Service: "checkout", Symptom: "p99 latency above 2s"}, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	parked, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	gate := parked.Variables.SuspendedOn.On
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: json.RawMessage(`{"decision":"approve","by":"ann"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSettled(ctx, id); err == nil {
		t.Fatal("the dying process finished the incident")
	}
	_ = rt.Close() // the journal failed: Close reports it
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	log := readLogFile(t, db, id)
	if last := log[len(log)-1]; last.Type != event.StepStarted || !strings.Contains(string(last.Payload), applyStep) {
		t.Fatalf("the dying process left %s %s last", last.Type, last.Payload)
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
	cfg, _ = process(t, loom.Config{Events: st.Events, Snapshots: st.Snapshots, Branches: st.Branches, Timers: st.Timers, TimerPoll: -1,
		Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}}, newEffectCounter(), committedModel(t))
	rt, err = loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	parked, err = rt.WaitForSuspend(ctx, id)
	if err != nil || parked.Variables.SuspendedOn.On != fold.GateInDoubt {
		t.Fatalf("not parked in doubt: %+v %v", parked.Variables.SuspendedOn, err)
	}
}

// readLogFile reads the log of id from the SQLite file db, read-only.
func readLogFile(t *testing.T, db, id string) []event.Envelope {
	t.Helper()
	ro, err := sqlite.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	evs, err := store.Read(context.Background(), ro.EventStore(), id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestInDoubtIncident: an incident whose apply_fix call was running when
// its process died is parked in doubt; status says so and what to run; approve
// says it is parked in doubt and names resolve (not a schema problem);
// resolve -rerun runs the fix again and the incident completes.
func TestInDoubtIncident(t *testing.T) {
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "incident.db")
	parkInDoubt(t, db, "inc-doubt")

	out := mustRun(t, bin, "status", "inc-doubt", "-db", db)
	inOrder(t, out,
		"Status: parked in doubt: step planner/turn:3/tool:0 attempt 1 started, and the process running it stopped before its outcome was recorded",
		"Next: check whether planner/turn:3/tool:0 acted (was the fix deployed? look at the service's change log), then record what you found:",
		"incident resolve inc-doubt -done '<its output as JSON>' -db "+db+"   if it did",
		"incident resolve inc-doubt -rerun -db "+db,
		"(while incident serve runs: loom resolve inc-doubt --done OUTPUT | --rerun)")
	if strings.Contains(out, "incident approve") {
		t.Fatalf("status of an in-doubt incident suggests approve:\n%s", out)
	}
	before := len(readLogFile(t, db, "inc-doubt"))
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"approve", "inc-doubt", "-db", db, "-by", "bob"}, 1, "inc-doubt is parked in doubt, not at an approval gate"},
		{[]string{"approve", "inc-doubt", "-db", db, "-by", "bob"}, 1, "incident resolve inc-doubt -rerun -db " + db},
		{[]string{"answer", "inc-doubt", `{"decision":"reject"}`, "-db", db}, 1, "parked in doubt"},
		{[]string{"resolve", "inc-doubt", "-db", db}, 2, "give one verdict"},
		{[]string{"resolve", "inc-doubt", "-db", db, "-done", "deployed"}, 2, "-done takes the step's output as JSON"},
		{[]string{"resolve", "inc-doubt", "-db", db, "-done", "{}", "-rerun"}, 2, "give one verdict"},
	} {
		_, errOut, code := runBinary(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "schema") {
			t.Errorf("incident %v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.says)
		}
	}
	if after := len(readLogFile(t, db, "inc-doubt")); after != before {
		t.Fatalf("refusals appended %d events", after-before)
	}
	out = mustRun(t, bin, "resolve", "inc-doubt", "-rerun", "-db", db)
	inOrder(t, out, "Resolved inc-doubt: planner/turn:3/tool:0 runs again, as attempt 2",
		"Ran in this process: planner turn 3 (tool:0), planner turn 4 (model), verify-recovery.", "Model calls this process made: 1", "Completed: fixed")
	if _, errOut, code := runBinary(t, bin, "resolve", "inc-doubt", "-rerun", "-db", db); code != 1 || !strings.Contains(errOut, "inc-doubt is not parked in doubt (completed") {
		t.Fatalf("a second resolve: exit %d %s", code, errOut)
	}
}

// TestBusyIncident: while another process holds an incident's lease (one
// that was killed holds it until it lapses), approve is refused saying who
// holds it and when to retry.
func TestBusyIncident(t *testing.T) {
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "incident.db")
	mustRun(t, bin, "start", "-db", db, "-id", "inc-busy", "-q")
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := st.Leases.Acquire(context.Background(), "inc-busy", "node-killed", time.Now().UnixMilli(), (30 * time.Second).Milliseconds())
	if cerr := st.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	_, errOut, code := runBinary(t, bin, "approve", "inc-busy", "-db", db, "-by", "ann")
	retry := time.UnixMilli(lease.ExpiresAt).UTC().Format(time.RFC3339)
	if code != 1 || !strings.Contains(errOut, "inc-busy is being driven by process node-killed, perhaps one that was killed") ||
		!strings.Contains(errOut, "retry after "+retry+" (in ") {
		t.Fatalf("approve of a busy incident: exit %d %s", code, errOut)
	}
}
