package loom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/saga"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The coordination scenario: the parent "order" runs a saga. It reserves
// (a counted effect), spawns the children c1, c2 and c3 (flow "pack", one
// counted effect each) and awaits them with AwaitAll; it then adopts each
// completed child as a saga step ("adopt-<name>", no effect of its own),
// whose compensation unpacks that child's parcel. When a child refuses (a
// typed failure of its step, which acts on nothing), the saga compensates
// in reverse: unpack the adopted parcels, last adopted first, then
// unreserve; the parent fails with the childFailed inside its recorded
// error. Without a refusal it completes with a summary and nothing is
// compensated.

// coordParent is the parent's execution id; its children are
// coordParent+"/"+name.
const coordParent = "order-7"

// coordChildren are the children's names, in spawn and await order.
var coordChildren = []string{"c1", "c2", "c3"}

// coordCaseTimeout guards one run against a hang; no wait is paced by it.
const coordCaseTimeout = 20 * time.Second

// coordMaxCrashPoints bounds the matrix: a run that still crashes after
// this many events never completes.
const coordMaxCrashPoints = 400

type coordInput struct {
	Order string `json:"order"`
	Fail  string `json:"fail,omitempty"` // the child that refuses; "" for none
}

type packInput struct {
	Item string `json:"item"`
	Fail bool   `json:"fail,omitempty"`
}

type coordSummary struct {
	Hold    string   `json:"hold"`
	Parcels []string `json:"parcels"`
}

// effectCall is one invocation of a counted effect, as the outside world
// saw it: which process ran it, for which step attempt, under which key.
type effectCall struct {
	process   string
	execution string
	step      string
	attempt   int64
	key       string
	what      string
}

// effectLedger records every effect invocation outside the runtimes; it
// outlives a crash as the world does.
type effectLedger struct {
	mu    sync.Mutex
	calls []effectCall
}

func (l *effectLedger) record(ctx context.Context, process, what string) {
	ec := effect.FromContext(ctx)
	if ec == nil {
		panic("coordination: an effect ran without an effect context")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, effectCall{process: process, execution: ec.ExecutionID, step: ec.StepID,
		attempt: ec.Attempt, key: ec.IdempotencyKey, what: what})
}

func (l *effectLedger) snapshot() []effectCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// deduped returns what the world performed once a provider dedupes by
// idempotency key: the first call of each key, in call order.
func deduped(calls []effectCall) []effectCall {
	seen := map[string]bool{}
	var out []effectCall
	for _, c := range calls {
		if !seen[c.key] {
			seen[c.key] = true
			out = append(out, c)
		}
	}
	return out
}

// coordinationFlows are the scenario's flows for one process; their
// effects record in l under that process's name.
func coordinationFlows(m coordMode, l *effectLedger, process string) []*loom.Flow {
	pack := loom.NewStep("pack", func(ctx context.Context, in packInput) (string, error) {
		if in.Fail {
			// A typed refusal is durable: recovery serves it from the log.
			return "", loom.Fail("outOfStock", map[string]string{"item": in.Item})
		}
		l.record(ctx, process, "pack "+in.Item)
		return "parcel-" + in.Item, nil
	}, loom.ErrorChannel("outOfStock", `{"type":"object"}`))
	child := loom.NewFlow("pack", func(c *loom.Context, in packInput) (string, error) {
		return loom.Run(c, pack, in)
	})

	reserve := loom.NewStep("reserve", func(ctx context.Context, order string) (string, error) {
		l.record(ctx, process, "reserve "+order)
		return "hold-" + order, nil
	})
	unreserve := loom.NewStep("unreserve", func(ctx context.Context, u saga.Undo[string, string]) (bool, error) {
		l.record(ctx, process, "unreserve "+u.Output)
		return true, nil
	})
	adopt := func(name string) *loom.Step[loom.ChildResult, string] {
		return loom.NewStep("adopt-"+name, func(ctx context.Context, r loom.ChildResult) (string, error) {
			var parcel string
			err := json.Unmarshal(r.Output, &parcel)
			return parcel, err
		})
	}
	unpack := loom.NewStep("unpack", func(ctx context.Context, u saga.Undo[loom.ChildResult, string]) (bool, error) {
		l.record(ctx, process, "unpack "+u.Output)
		return true, nil
	})
	parent := loom.NewFlow("order", func(c *loom.Context, in coordInput) (coordSummary, error) {
		s := saga.New(c)
		hold, err := saga.Run(s, reserve, in.Order, unreserve)
		if err != nil {
			return coordSummary{}, s.Compensate(err)
		}
		kids := make([]loom.Child, 0, len(coordChildren))
		for _, name := range coordChildren {
			k, err := loom.SpawnChild(c, "pack", name, packInput{Item: name, Fail: name == in.Fail})
			if err != nil {
				return coordSummary{}, s.Compensate(err)
			}
			kids = append(kids, k)
		}
		results, awaitErr := loom.AwaitAll(c, kids)
		// A completed child's effect is this saga's to undo: adopting it
		// registers its compensation (AwaitAll returns every result with
		// the childFailed).
		summary := coordSummary{Hold: hold, Parcels: []string{}}
		for i, r := range results {
			if r.Status != fold.StatusCompleted {
				continue
			}
			parcel, err := saga.Run(s, adopt(coordChildren[i]), r, unpack)
			if err != nil {
				return coordSummary{}, s.Compensate(err)
			}
			summary.Parcels = append(summary.Parcels, parcel)
		}
		if awaitErr != nil {
			return coordSummary{}, s.Compensate(awaitErr)
		}
		return summary, nil
	})
	return []*loom.Flow{child, parent}
}

// coordVariant is one scenario of the matrix.
type coordVariant struct {
	name  string
	input coordInput
	// forward are the effects before any compensation (the children's in
	// any order after the reservation); compensations are the undoing
	// effects, in the order they must run.
	forward       []string
	compensations []string
	// sagaSteps are the parent's saga steps in completion order.
	sagaSteps []string
}

var coordVariants = []coordVariant{
	{
		name:          "c3-refuses",
		input:         coordInput{Order: "o-1", Fail: "c3"},
		forward:       []string{"reserve o-1", "pack c1", "pack c2"},
		compensations: []string{"unpack parcel-c2", "unpack parcel-c1", "unreserve hold-o-1"},
		sagaSteps:     []string{"reserve", "adopt-c1", "adopt-c2"},
	},
	{
		name:      "all-complete",
		input:     coordInput{Order: "o-2"},
		forward:   []string{"reserve o-2", "pack c1", "pack c2", "pack c3"},
		sagaSteps: []string{"reserve", "adopt-c1", "adopt-c2", "adopt-c3"},
	},
}

// coordMode is how the runtime records, and whether parks are sticky (a
// parked drive kept in memory and answered in place) or not (each child
// answer a transaction on the parked parent, each resume a replay of its
// log).
type coordMode struct {
	name       string
	durability loom.Durability
	sticky     bool
}

var coordModes = []coordMode{
	{name: "StepDurable", durability: loom.StepDurable},
	{name: "WriteBehind", durability: loom.WriteBehind},
	{name: "WriteBehindSticky", durability: loom.WriteBehind, sticky: true},
}

func openCoordination(t *testing.T, events store.EventStore, snaps store.SnapshotStore, m coordMode, l *effectLedger, process string) *loom.Runtime {
	t.Helper()
	cfg := loom.Config{
		Events: events, Snapshots: snaps, SnapshotEvery: 4, // snapshots mid-run, so state is snapshot plus tail
		Flows: coordinationFlows(m, l, process), Durability: m.durability,
		Features: loom.Features{Children: true},
		// The test calls Recover itself, in the fresh process.
		Recovery: loom.Recovery{Disabled: true},
		Logger:   slog.New(slog.DiscardHandler),
	}
	rt, err := loom.New(withSticky(cfg, m.sticky))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// coordOutcome is what one run (crashed and recovered, or not) left.
type coordOutcome struct {
	crashed bool
	// durableBeforeCrash holds "<execution> <step>" of every step whose
	// STEP_COMPLETED was durable when process A died.
	durableBeforeCrash map[string]bool
	logs               map[string][]event.Envelope
	// states are the final states as the last runtime's waits returned
	// them (snapshot plus tail).
	states map[string]fold.State
	calls  []effectCall
	// appended is how many events process A made durable.
	appended int
}

// runCoordination runs v in process A over a FaultStore that kills it
// after killAfter events (never when negative); if A died, a fresh
// process B recovers the durable log and drives the parent to its end.
func runCoordination(t *testing.T, v coordVariant, m coordMode, killAfter int) coordOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), coordCaseTimeout)
	defer cancel()
	// The durable stores outlive both processes; A writes events through fs.
	events, snaps := memstore.NewEventStore(), memstore.NewSnapshotStore()
	ledger := &effectLedger{}
	fs := crashtest.NewFaultStore(events)
	fs.KillAfter(killAfter)

	a := openCoordination(t, fs, snaps, m, ledger, "A")
	out := coordOutcome{states: map[string]fold.State{}}
	if _, err := a.Start(ctx, "order", v.input, loom.WithExecutionID(coordParent)); err != nil && !fs.Dead() {
		t.Fatalf("Start: %v", err)
	}
	waitCtx, stopWait := context.WithCancel(ctx)
	ended := make(chan loom.Result, 1)
	go func() {
		res, _ := a.WaitForCompletion(waitCtx, coordParent) // a failed parent is an error too
		ended <- res
	}()
	var res loom.Result
	select {
	case res = <-ended:
	case <-fs.Killed():
		stopWait()
		<-ended
	case <-ctx.Done():
		t.Fatalf("process A neither died nor ended the parent: %v", ctx.Err())
	}
	stopWait()
	if !fs.Dead() {
		// The parent ended in A, so every child had ended before it.
		out.states[coordParent] = res.State
		collectChildStates(t, ctx, a, out.states)
	}
	if err := a.Close(); err != nil { // waits for A's drives to stop
		t.Fatal(err)
	}
	out.crashed, out.appended = fs.Dead(), fs.Appended()
	if out.crashed {
		out.durableBeforeCrash = completedSteps(t, ctx, events)
		b := openCoordination(t, events, snaps, m, ledger, "B")
		if _, err := b.Recover(ctx); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		res, err := b.WaitForCompletion(ctx, coordParent)
		if !res.Status.Terminal() {
			t.Fatalf("after recovery the parent did not end: %v %v\n%s", res.Status, err, describeLogs(readAllLogs(t, context.Background(), events)))
		}
		out.states[coordParent] = res.State
		collectChildStates(t, ctx, b, out.states)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	out.logs = readAllLogs(t, ctx, events)
	out.calls = ledger.snapshot()
	return out
}

// collectChildStates waits for every child to end in rt and keeps the
// state its wait returned.
func collectChildStates(t *testing.T, ctx context.Context, rt *loom.Runtime, states map[string]fold.State) {
	t.Helper()
	for _, name := range coordChildren {
		id := loom.ChildID(coordParent, name)
		res, err := rt.WaitForCompletion(ctx, id)
		if !res.Status.Terminal() {
			t.Fatalf("child %s did not end: %v %v", id, res.Status, err)
		}
		states[id] = res.State
	}
}

// readAllLogs returns every execution's log in the store, by id.
func readAllLogs(t *testing.T, ctx context.Context, events store.EventStore) map[string][]event.Envelope {
	t.Helper()
	logs := map[string][]event.Envelope{}
	after := ""
	for {
		page, err := events.ListExecutions(ctx, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Executions {
			log, err := store.Read(ctx, events, e.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			logs[e.ExecutionID] = log
		}
		if page.Next == "" {
			return logs
		}
		after = page.Next
	}
}

// describeLogs tells how each execution stands, for a failure message.
func describeLogs(logs map[string][]event.Envelope) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		st := fold.Fold(logs[id])
		fmt.Fprintf(&b, "  %s: %s", id, st.Status)
		if on := st.Variables.SuspendedOn; on != nil {
			fmt.Fprintf(&b, " on %s %s", on.On, on.CorrelationKey)
		}
		b.WriteString(":")
		for _, e := range logs[id] {
			fmt.Fprintf(&b, " %s", e.Type)
			if e.Type == event.StepStarted || e.Type == event.StepCompleted || e.Type == event.StepFailed {
				var p struct {
					StepID string `json:"stepId"`
				}
				_ = json.Unmarshal(e.Payload, &p)
				fmt.Fprintf(&b, "(%s)", p.StepID)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// completedSteps returns "<execution> <step>" of every durable
// STEP_COMPLETED in the store.
func completedSteps(t *testing.T, ctx context.Context, events store.EventStore) map[string]bool {
	t.Helper()
	done := map[string]bool{}
	for id, log := range readAllLogs(t, ctx, events) { //loom:order-independent a set is built
		for _, e := range log {
			if e.Type == event.StepCompleted {
				done[id+" "+coordStepID(t, e)] = true
			}
		}
	}
	return done
}

func coordStepID(t *testing.T, e event.Envelope) string {
	t.Helper()
	var p struct {
		StepID string `json:"stepId"`
	}
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatalf("event %d %s: %v", e.Sequence, e.Type, err)
	}
	return p.StepID
}

// coordReference is the uncrashed run every crashed one must equal.
type coordReference struct {
	out    coordOutcome
	states map[string]map[string]any // normalised, by execution
}

// checkCoordination checks the invariants of one run against v and, when
// ref is not nil, against the uncrashed run.
func checkCoordination(t *testing.T, v coordVariant, ref *coordReference, out coordOutcome) {
	t.Helper()
	childIDs := make([]string, len(coordChildren))
	for i, name := range coordChildren {
		childIDs[i] = loom.ChildID(coordParent, name)
	}

	// One execution per child, started once, as this parent's child.
	ids := slices.Sorted(maps.Keys(out.logs))
	if want := append([]string{coordParent}, childIDs...); !slices.Equal(ids, want) {
		t.Errorf("executions in the store: %v, want %v", ids, want)
	}
	for i, id := range childIDs {
		var starts []event.Envelope
		for _, e := range out.logs[id] {
			if e.Type == event.ExecutionStarted {
				starts = append(starts, e)
			}
		}
		if len(starts) != 1 || starts[0].Sequence != 0 {
			t.Errorf("child %s has %d EXECUTION_STARTED (first at seq %v), want exactly one, first", id, len(starts), seqs(starts))
			continue
		}
		var p struct {
			Parent loom.ParentLink `json:"parent"`
		}
		if err := json.Unmarshal(starts[0].Payload, &p); err != nil || p.Parent != (loom.ParentLink{ExecutionID: coordParent, Name: coordChildren[i]}) {
			t.Errorf("child %s started with parent %s (%v), want %s/%s", id, starts[0].Payload, err, coordParent, coordChildren[i])
		}
		if link, ok := loom.ParentOf(out.states[id]); !ok || link.ExecutionID != coordParent || link.Name != coordChildren[i] {
			t.Errorf("child %s: ParentOf = %+v, %v", id, link, ok)
		}
	}

	// The runtime's state is the fold of the log, byte for byte.
	for _, id := range append([]string{coordParent}, childIDs...) {
		got, gerr := fold.Encode(out.states[id])
		want, werr := fold.Encode(fold.Fold(out.logs[id]))
		if gerr != nil || werr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the runtime's state differs from the log's fold (%v, %v):\n  runtime %s\n  fold    %s", id, gerr, werr, got, want)
		}
	}

	checkCoordinationEffects(t, v, out)
	checkCompensationOrder(t, v, out.logs[coordParent])

	if ref == nil {
		return
	}
	// The parent ends as uncrashed: status, error and output, and every
	// execution's state up to what recovery may change.
	got, want := out.states[coordParent], ref.out.states[coordParent]
	if got.Status != want.Status || !jsonEqual(got.Variables.Error, want.Variables.Error) || !jsonEqual(got.Variables.Output, want.Variables.Output) {
		t.Errorf("the parent ended %s error %s output %s; uncrashed it ended %s error %s output %s",
			got.Status, got.Variables.Error, got.Variables.Output, want.Status, want.Variables.Error, want.Variables.Output)
	}
	for id, wantNorm := range ref.states { //loom:order-independent each execution is compared alone
		norm, err := crashtest.Normalize(out.states[id])
		if err != nil {
			t.Fatal(err)
		}
		if d := crashtest.Diff(wantNorm, norm); d != "" {
			t.Errorf("%s: the final state differs from the uncrashed run's:%s", id, d)
		}
	}
}

// checkCoordinationEffects checks the world: each effect under exactly
// one distinct idempotency key, the key of the attempt the log completed;
// at most one call per key per process (a re-run after a crash carries
// the same key: at least once, deduplicated by key); none re-run after
// its completion was durable; and, deduplicated, the forward effects then
// the compensations in their order.
func checkCoordinationEffects(t *testing.T, v coordVariant, out coordOutcome) {
	t.Helper()
	keysOf := map[string][]string{}
	perProcess := map[string]int{}
	for _, c := range out.calls {
		if !slices.Contains(keysOf[c.what], c.key) {
			keysOf[c.what] = append(keysOf[c.what], c.key)
		}
		perProcess[c.process+" "+c.key]++
		if out.durableBeforeCrash[c.execution+" "+c.step] && c.process == "B" {
			t.Errorf("%s (%s) completed durably before the crash but ran again after it", c.what, c.key)
		}
		fr, ok := out.states[c.execution].Frames[c.step]
		if want := effect.IdempotencyKey(c.execution, c.step, fr.Attempt); !ok || fr.Status != fold.FrameCompleted || c.key != want {
			t.Errorf("%s ran under key %s; the log completed %s/%s as %+v (key %s)", c.what, c.key, c.execution, c.step, fr.Status, want)
		}
	}
	for pk, n := range perProcess { //loom:order-independent each count is checked alone
		if n > 1 {
			t.Errorf("process %s ran one attempt %d times", pk, n)
		}
	}
	for what, keys := range keysOf { //loom:order-independent each effect is checked alone
		if len(keys) != 1 {
			t.Errorf("%s ran under %d distinct keys %v, want one", what, len(keys), keys)
		}
	}
	var done []string
	for _, c := range deduped(out.calls) {
		done = append(done, c.what)
	}
	n := min(len(v.forward), len(done))
	forward, undone := done[:n], done[n:]
	if !slices.Equal(slices.Sorted(slices.Values(forward)), slices.Sorted(slices.Values(v.forward))) || (n > 0 && forward[0] != v.forward[0]) {
		t.Errorf("forward effects %v, want the reservation then the children's %v", forward, v.forward)
	}
	if !slices.Equal(undone, v.compensations) {
		t.Errorf("compensations %v, want %v (each once, none skipped, in reverse)", undone, v.compensations)
	}
}

// checkCompensationOrder checks the parent's log: each saga step completed
// once, in v's order, and each compensation once, in the reverse order.
func checkCompensationOrder(t *testing.T, v coordVariant, log []event.Envelope) {
	t.Helper()
	var forward, undone []string
	for _, e := range log {
		if e.Type != event.StepCompleted {
			continue
		}
		switch id := coordStepID(t, e); {
		case strings.HasPrefix(id, "compensate:"):
			undone = append(undone, strings.TrimPrefix(id, "compensate:"))
		case id == "reserve" || strings.HasPrefix(id, "adopt-"):
			forward = append(forward, id)
		}
	}
	if !slices.Equal(forward, v.sagaSteps) {
		t.Errorf("the parent completed the saga steps %v, want %v", forward, v.sagaSteps)
	}
	var want []string
	if len(v.compensations) > 0 {
		want = slices.Clone(forward)
		slices.Reverse(want)
	}
	if !slices.Equal(undone, want) {
		t.Errorf("the parent compensated %v, want %v (the reverse of completion, each once)", undone, want)
	}
}

func seqs(evs []event.Envelope) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// checkCoordinationResult checks how the uncrashed parent ends: failed
// with the refusing child's childFailed (and the saga's undone steps) in
// its recorded error, or completed with the summary.
func checkCoordinationResult(t *testing.T, v coordVariant, st fold.State) {
	t.Helper()
	if v.input.Fail == "" {
		want := `{"hold":"hold-` + v.input.Order + `","parcels":["parcel-c1","parcel-c2","parcel-c3"]}`
		if st.Status != fold.StatusCompleted || !jsonEqual(st.Variables.Output, json.RawMessage(want)) {
			t.Fatalf("the parent ended %s with %s, want completed with %s", st.Status, st.Variables.Output, want)
		}
		return
	}
	var rec struct {
		Message string      `json:"message"`
		Name    string      `json:"name"`
		ChildID string      `json:"childId"`
		Status  fold.Status `json:"status"`
		Child   struct {
			Channel string `json:"channel"`
		} `json:"child"`
	}
	if st.Status != fold.StatusFailed || json.Unmarshal(st.Variables.Error, &rec) != nil {
		t.Fatalf("the parent ended %s with error %s, want failed", st.Status, st.Variables.Error)
	}
	failed := loom.ChildID(coordParent, v.input.Fail)
	if rec.Name != "childFailed" || rec.ChildID != failed || rec.Status != fold.StatusFailed || rec.Child.Channel != "outOfStock" ||
		!strings.Contains(rec.Message, "compensated adopt-c2, adopt-c1, reserve") {
		t.Fatalf("the parent's recorded error %s, want the childFailed of %s (channel outOfStock) naming the undone steps", st.Variables.Error, failed)
	}
}

// TestCoordinationCrashMatrix kills the process after every event of a
// parent's saga over three children (the parent's, the children's, and
// the gate answers', in whatever order the processes wrote them: the
// count is over the one store they share), then recovers the durable
// log in a fresh process: every child is started once, as this parent's
// child; every effect and every compensation acts once by idempotency
// key, none re-run after its completion was durable, none skipped, the
// compensations in reverse order of completion; the parent ends as the
// uncrashed run did; and every state is its log's fold. A crash point
// is an event count, so it covers every append and every prefix of a
// multi-event batch. Both durability modes, with and without a refusing
// child, sticky parks off (see coordMode).
func TestCoordinationCrashMatrix(t *testing.T) {
	for _, v := range coordVariants {
		for _, m := range coordModes {
			t.Run(v.name+"/"+m.name, func(t *testing.T) {
				refOut := runCoordination(t, v, m, -1)
				checkCoordination(t, v, nil, refOut)
				checkCoordinationResult(t, v, refOut.states[coordParent])
				if t.Failed() {
					t.FailNow()
				}
				ref := &coordReference{out: refOut, states: map[string]map[string]any{}}
				for id, st := range refOut.states { //loom:order-independent a map is built
					norm, err := crashtest.Normalize(st)
					if err != nil {
						t.Fatal(err)
					}
					ref.states[id] = norm
				}
				for n := 1; ; n++ {
					if n > coordMaxCrashPoints {
						t.Fatalf("the run still crashed after %d events (the uncrashed run wrote %d)", coordMaxCrashPoints, refOut.appended)
					}
					crashed := true // a case that stopped short crashed, as far as the matrix goes
					t.Run(fmt.Sprintf("kill-after-%d", n), func(t *testing.T) {
						out := runCoordination(t, v, m, n)
						crashed = out.crashed
						checkCoordination(t, v, ref, out)
					})
					if !crashed {
						// n passed the run's last event: every point before it was covered.
						if n < refOut.appended {
							t.Fatalf("the run survived a crash after %d events, the uncrashed run wrote %d: the matrix covered too little", n, refOut.appended)
						}
						t.Logf("%d crash points (the uncrashed run wrote %d events)", n-1, refOut.appended)
						return
					}
				}
			})
		}
	}
}

// TestASpawnWhoseStoreFailsEndsTheDrive: under WriteBehind, a SpawnChild
// whose child start fails because the store died must not hand the flow an
// error while none of the parent's run is durable: the flow's failure path
// would act in the world (here an "undo" effect; in a saga its
// compensations) although nothing of it can reach the log, and recovery
// would replay the durable log, spawn again and complete, leaving an undo
// the final log never ran. Like a failed journal append, the failed start
// ends the drive.
func TestASpawnWhoseStoreFailsEndsTheDrive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coordCaseTimeout)
	defer cancel()
	var undone atomic.Int64
	acted := make(chan struct{})
	flows := func() []*loom.Flow {
		leaf := loom.NewFlow("leaf", func(c *loom.Context, _ struct{}) (int, error) { return 1, nil })
		spawner := loom.NewFlow("spawner", func(c *loom.Context, _ struct{}) (string, error) {
			if _, err := loom.SpawnChild(c, "leaf", "k", nil); err != nil {
				if _, uerr := c.Run("undo", func(context.Context) (any, error) {
					if undone.Add(1) == 1 {
						close(acted)
					}
					return true, nil
				}); uerr != nil {
					return "", uerr
				}
				return "", err
			}
			return "spawned", nil
		})
		return []*loom.Flow{leaf, spawner}
	}
	open := func(events store.EventStore, logger *slog.Logger) *loom.Runtime {
		rt, err := loom.New(loom.Config{Events: events, Flows: flows(), Durability: loom.WriteBehind,
			Features: loom.Features{Children: true}, Recovery: loom.Recovery{Disabled: true}, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	durable := memstore.NewEventStore()
	dying := &diesAtChildStart{EventStore: durable, child: loom.ChildID("p", "k"), release: make(chan struct{})}
	logged := make(chan string, 16)
	a := open(dying, slog.New(signalHandler{logged}))
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(dying.release) }) }
	t.Cleanup(release) // runs before a's Close: a stalled write must not hold it
	if _, err := a.Start(ctx, "spawner", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	// The dying drive either acts on the spawn's failure or ends. A kernel
	// that makes the failure durable before the flow sees it waits on the
	// stalled write instead and never says so: after stalledWait the write
	// is let fail, and the drive ends.
	const stalledWait = 2 * time.Second
	stalled := time.NewTimer(stalledWait)
	defer stalled.Stop()
	for waiting := true; waiting; {
		select {
		case <-acted:
			waiting = false
		case msg := <-logged:
			waiting = !strings.HasPrefix(msg, "loom: drive aborted")
		case <-stalled.C:
			waiting = false
		case <-ctx.Done():
			t.Fatalf("the dying drive neither acted nor ended: %v", ctx.Err())
		}
	}
	release()
	if err := a.Close(); err != nil { // waits for the dying drive to stop
		t.Fatal(err)
	}
	b := open(durable, slog.New(slog.DiscardHandler))
	if _, err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := b.WaitForCompletion(ctx, "p")
	if err != nil || string(res.Output) != `"spawned"` {
		t.Fatalf("after recovery: %v %s, %v; want completed, spawned", res.Status, res.Output, err)
	}
	if n := undone.Load(); n != 0 {
		_, inLog := res.State.Frames["undo"]
		t.Fatalf("the undo effect acted %d time(s) in the dying process; the recovered log completed the spawn (undo in the log: %v)", n, inLog)
	}
}

// diesAtChildStart is the store of a process that dies when it writes the
// child's start: that write and every later one fail, and the others'
// writes after it hang until release, as a dying process's writes in
// flight do (so the parent's journal cannot see its own failure first).
type diesAtChildStart struct {
	store.EventStore
	child   string
	release chan struct{}

	mu   sync.Mutex
	dead bool
}

func (d *diesAtChildStart) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	d.mu.Lock()
	d.dead = d.dead || id == d.child
	dead := d.dead
	d.mu.Unlock()
	if !dead {
		return d.EventStore.Append(ctx, id, expected, evs)
	}
	if id != d.child {
		select {
		case <-d.release:
		case <-ctx.Done():
		}
	}
	return crashtest.ErrKilled
}

// TestRecoverDrivesAChildARetriedSpawnAdopts: a spawn re-run after a
// crash finds its child already started (by the process that died before
// driving it) and adopts it without claiming its id, and drives it; a
// Recover pass that reaches the child meanwhile is not kept from it. One
// Recover then completes the parent. The stores order the race: the
// recovery of the parent's other child waits until the re-run spawn has
// looked at the started child.
func TestRecoverDrivesAChildARetriedSpawnAdopts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), coordCaseTimeout)
	defer cancel()
	flows := func(process string) []*loom.Flow {
		leaf := loom.NewFlow("leaf", func(c *loom.Context, n int) (int, error) {
			out, err := c.Run("work", func(ctx context.Context) (any, error) {
				if process == "A" {
					<-ctx.Done() // the crash takes the process down mid-step
					return nil, ctx.Err()
				}
				return n, nil
			})
			if err != nil {
				return 0, err
			}
			return int(out[0] - '0'), nil
		})
		parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
			j, err := loom.SpawnChild(c, "leaf", "j", 1)
			if err != nil {
				return 0, err
			}
			k, err := loom.SpawnChild(c, "leaf", "k", 2)
			if err != nil {
				return 0, err
			}
			a, err := loom.AwaitChildTyped[int](c, j)
			if err != nil {
				return 0, err
			}
			b, err := loom.AwaitChildTyped[int](c, k)
			return a + b, err
		})
		return []*loom.Flow{leaf, parent}
	}
	open := func(events store.EventStore, process string) *loom.Runtime {
		rt, err := loom.New(withSticky(loom.Config{Events: events, Flows: flows(process), Durability: loom.StepDurable,
			Features: loom.Features{Children: true}, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}, false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	durable := memstore.NewEventStore()
	child, other := loom.ChildID("p", "k"), loom.ChildID("p", "j")

	// Process A dies right after p/k's start: p's spawn of k has no outcome.
	dying := &diesAfter{EventStore: durable, last: child, dead: make(chan struct{})}
	a := open(dying, "A")
	if _, err := a.Start(ctx, "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dying.dead:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Process B: Recover goes over p (re-driven: its spawn of k runs again
	// and finds p/k started), then p/j (its recovery write waits until the
	// spawn of k settled), then p/k.
	ordered := &orderedRecovery{EventStore: durable, parent: "p", child: child, other: other,
		ready: make(chan struct{}), release: make(chan struct{})}
	b := open(ordered, "B")
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(ordered.release) }) }
	t.Cleanup(release)
	if _, err := b.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	release()
	guard, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	res, err := b.WaitForCompletion(guard, "p")
	if err != nil || string(res.Output) != "3" {
		st, _ := b.LoadState(ctx, child)
		t.Fatalf("the parent did not end (%v %s, %v): its child %s is %s, and nothing drives it", res.Status, res.Output, err, child, st.Status)
	}
}

// diesAfter forwards appends until the first one to last succeeds; every
// append after it fails.
type diesAfter struct {
	store.EventStore
	last string
	dead chan struct{}

	mu   sync.Mutex
	gone bool
}

func (d *diesAfter) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone {
		return crashtest.ErrKilled
	}
	err := d.EventStore.Append(ctx, id, expected, evs)
	if err == nil && id == d.last {
		d.gone = true
		close(d.dead)
	}
	return err
}

func (d *diesAfter) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return d.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}

func (d *diesAfter) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	return d.EventStore.(store.RangeReader).ReadRange(ctx, id, from, to)
}

// orderedRecovery orders a recovery pass against a re-run spawn: other's
// EXECUTION_RECOVERED waits until the spawn of child has settled — its
// step completed in the parent's log, or (as a kernel that claims the id
// of a child it adopts would) its start write on child, which then waits
// for release, holding the claim until Recover has returned.
type orderedRecovery struct {
	store.EventStore
	parent, child, other string
	ready, release       chan struct{}
	readyOnce            sync.Once
}

func (o *orderedRecovery) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	switch {
	case id == o.child && expected == 0:
		o.readyOnce.Do(func() { close(o.ready) })
		select {
		case <-o.release:
		case <-ctx.Done():
		}
	case id == o.other && len(evs) > 0 && evs[0].Type == event.ExecutionRecovered:
		select {
		case <-o.ready:
		case <-ctx.Done():
		}
	}
	err := o.EventStore.Append(ctx, id, expected, evs)
	if id == o.parent && err == nil {
		for _, e := range evs {
			if e.Type == event.StepCompleted && strings.Contains(string(e.Payload), `"stepId":"__loom_spawn:k"`) {
				o.readyOnce.Do(func() { close(o.ready) })
			}
		}
	}
	return err
}

func (o *orderedRecovery) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return o.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}

func (o *orderedRecovery) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	return o.EventStore.(store.RangeReader).ReadRange(ctx, id, from, to)
}

// TestAStickyChildParkMissesNoWakeUp: with sticky parks, a parent must
// not miss the end of the child it awaits, no crash needed. Child x ends
// while the parent is parked on child w: x's wake-up (deliverChild) takes
// the sticky park out of the registry and reads w's log to see whether w
// has ended; w ends meanwhile, and its own wake-up finds no sticky park and
// a transaction on the parent is refused (its drive is live). x must look
// at w again once it has put the park back. A stress test: w's reads are
// slowed by yielding, which widens the window; the per-parent wait is
// only a hang guard.
func TestAStickyChildParkMissesNoWakeUp(t *testing.T) {
	held := loom.NewFlow("held", func(c *loom.Context, _ int) (int, error) { return loom.Suspend[int](c, "release") })
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		w, err := loom.SpawnChild(c, "held", "w", 0)
		if err != nil {
			return 0, err
		}
		if _, err := loom.SpawnChild(c, "held", "x", 0); err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, w)
	})
	rt, err := loom.New(loom.Config{Events: &slowReads{EventStore: memstore.NewEventStore(), suffix: "/w"},
		Flows: []*loom.Flow{held, parent}, Durability: loom.StepDurable, Features: loom.Features{Children: true},
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}) // sticky parks on, the default
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), coordCaseTimeout)
	defer cancel()
	const parents = 200
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		stuck []string
	)
	for i := range parents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("p", i)
			if _, err := rt.Start(ctx, "parent", nil, loom.WithExecutionID(id)); err != nil {
				t.Error(err)
				return
			}
			for _, e := range []string{id, id + "/w", id + "/x"} {
				if _, err := rt.WaitForSuspend(ctx, e); err != nil {
					t.Error(err)
					return
				}
			}
			var ends sync.WaitGroup
			for _, k := range []string{"x", "w"} { // both end at once, x's wake-up first
				ends.Add(1)
				go func() {
					defer ends.Done()
					err := rt.Resume(ctx, id+"/"+k, loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`1`)})
					// x is not awaited: once w's end completes the parent,
					// the parent's end may cancel x before x's own answer
					// lands, which is then refused as terminal.
					var refused *loom.ResumeRefusedError
					if err != nil && !(k == "x" && errors.As(err, &refused) && refused.Reason == loom.RefusedTerminal) {
						t.Error(err)
					}
				}()
			}
			ends.Wait()
			guard, stop := context.WithTimeout(ctx, 5*time.Second)
			defer stop()
			if res, err := rt.WaitForCompletion(guard, id); err != nil || string(res.Output) != "1" {
				st, _ := rt.LoadState(ctx, id+"/w")
				mu.Lock()
				stuck = append(stuck, fmt.Sprintf("%s (w %s)", id, st.Status))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(stuck) > 0 {
		slices.Sort(stuck)
		t.Fatalf("%d of %d parents stayed parked on a child that had ended, among them %v", len(stuck), parents, stuck[:min(len(stuck), 5)])
	}
}

// slowReads yields for a while after each read of an execution whose id
// ends in suffix, to widen a race window.
type slowReads struct {
	store.EventStore
	suffix string
}

func (s *slowReads) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	evs, err := s.EventStore.ReadFrom(ctx, id, from)
	if strings.HasSuffix(id, s.suffix) {
		for range 200 {
			runtime.Gosched()
		}
	}
	return evs, err
}

func (s *slowReads) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return s.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}

func (s *slowReads) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	return s.EventStore.(store.RangeReader).ReadRange(ctx, id, from, to)
}
