package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// settlement is what OnSettled or OnReleased saw.
type settlement struct {
	claim    store.Claim
	res      dispatch.ExecutionResult
	err      error
	released bool
}

// queueHarness is a Queue over a memstore on a fake clock, reporting every
// settled and released claim on ends.
type queueHarness struct {
	q     *dispatch.Queue
	store *memstore.QueueStore
	clock *fakeClock
	ends  chan settlement
}

func newQueueHarness(t *testing.T, d dispatch.Dispatcher, edit func(*dispatch.QueueConfig)) *queueHarness {
	t.Helper()
	h := &queueHarness{store: memstore.NewQueueStore(), clock: &fakeClock{now: time.UnixMilli(0)}, ends: make(chan settlement, 4096)}
	cfg := dispatch.QueueConfig{
		Store: h.store, Name: "starts", Dispatcher: d, Owner: "node-1", ClaimTTL: 3 * time.Second, Clock: h.clock.Now,
		OnSettled: func(c store.Claim, res dispatch.ExecutionResult, err error) {
			h.ends <- settlement{claim: c, res: res, err: err}
		},
		OnReleased: func(c store.Claim, err error) { h.ends <- settlement{claim: c, err: err, released: true} },
	}
	if edit != nil {
		edit(&cfg)
	}
	q, err := dispatch.NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.q = q
	t.Cleanup(func() {
		if err := q.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h
}

func (h *queueHarness) enqueue(t *testing.T, id, tenant string) {
	t.Helper()
	if _, added, err := h.q.Enqueue(t.Context(), dispatch.EnqueueRequest{ExecutionID: id, FlowID: "f", Tenant: tenant}); err != nil || !added {
		t.Fatalf("Enqueue(%s) = %v, %v", id, added, err)
	}
}

func (h *queueHarness) runOnce(t *testing.T) int {
	t.Helper()
	n, err := h.q.RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (h *queueHarness) depth(t *testing.T) store.QueueDepth {
	t.Helper()
	d, err := h.q.Depth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// completes answers every package at once: the execution completed.
var completes = dispatcherFunc(func(_ context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted}, nil
})

// held is a Dispatcher whose calls wait for the test to answer them.
type held struct {
	calls chan heldCall

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
}

type heldCall struct {
	pkg    dispatch.ExecutionPackage
	answer chan error // nil: completed
}

func newHeld() *held { return &held{calls: make(chan heldCall, 1024)} }

func (h *held) Dispatch(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	h.mu.Lock()
	h.inFlight++
	h.maxInFlight = max(h.maxInFlight, h.inFlight)
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.inFlight--; h.mu.Unlock() }()
	call := heldCall{pkg: pkg, answer: make(chan error, 1)}
	h.calls <- call
	select {
	case err := <-call.answer:
		if err != nil {
			return dispatch.ExecutionResult{}, err
		}
		return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted}, nil
	case <-ctx.Done():
		return dispatch.ExecutionResult{}, ctx.Err()
	}
}

func (h *held) max() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxInFlight
}

// simulateLoad enqueues heavy items of tenant "heavy", then light ones of
// "light", all at tick 0, and runs the queue at concurrency 1, each
// dispatch taking one tick of the fake clock. It returns each tenant's
// waits in ticks, in dispatch order, and the tenants in dispatch order.
func simulateLoad(t *testing.T, sched dispatch.Scheduler, heavy, light int) (waits map[string][]int64, order []string) {
	t.Helper()
	h := newQueueHarness(t, completes, func(c *dispatch.QueueConfig) {
		c.Scheduler = sched
		c.Limits = store.QueueLimits{Concurrency: 1, PerOwner: 1}
		c.ClaimTTL = time.Hour
	})
	for i := range heavy {
		h.enqueue(t, fmt.Sprintf("h-%04d", i), "heavy")
	}
	for i := range light {
		h.enqueue(t, fmt.Sprintf("l-%04d", i), "light")
	}
	waits = map[string][]int64{}
	for range heavy + light {
		if n := h.runOnce(t); n != 1 {
			t.Fatalf("round claimed %d, want 1 (concurrency 1, work left)", n)
		}
		end := <-h.ends
		if end.err != nil || end.released {
			t.Fatalf("dispatch ended with %+v", end)
		}
		it := end.claim.Item
		waits[it.Tenant] = append(waits[it.Tenant], (end.claim.ClaimedAt-it.EnqueuedAt)/1000)
		order = append(order, it.Tenant)
		h.clock.advance(time.Second) // the dispatch took one tick
	}
	if n := h.runOnce(t); n != 0 {
		t.Fatalf("claimed %d after the last item", n)
	}
	if d := h.depth(t); d.Done != heavy+light || d.Ready != 0 || d.Claimed != 0 {
		t.Fatalf("depth %+v, want all %d done", d, heavy+light)
	}
	return waits, order
}

func p99(waits []int64) int64 {
	s := slices.Clone(waits)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// The fair-scheduling acceptance test: a light tenant enqueued behind a
// heavy one 100:1 waits about as many turns as it has items (twice its
// position at most, with two tenants ready) under equal weights, and the
// whole heavy backlog under FIFO.
func TestQueueFairSchedulingBoundsTheLightTenantsWait(t *testing.T) {
	fair, err := dispatch.NewFairScheduler(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	waits, _ := simulateLoad(t, fair, 1000, 10)
	for k, w := range waits["light"] {
		if limit := int64(2 * (k + 1)); w > limit {
			t.Errorf("fair: light item %d waited %d ticks, want at most %d", k+1, w, limit)
		}
	}
	if got := p99(waits["light"]); got > 20 {
		t.Errorf("fair: light p99 wait %d ticks, want at most 20", got)
	}

	waits, _ = simulateLoad(t, dispatch.FIFOScheduler{}, 1000, 10)
	if got := p99(waits["light"]); got < 1000 {
		t.Errorf("fifo: light p99 wait %d ticks, want at least 1000 (behind the heavy backlog)", got)
	}
}

// Weights 3:1 give the 3:1 share while both tenants are backlogged.
func TestQueueFairSchedulingHonoursWeights(t *testing.T) {
	fair, err := dispatch.NewFairScheduler(map[string]int{"heavy": 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, order := simulateLoad(t, fair, 400, 400)
	first := order[:400]
	heavy := 0
	for _, tenant := range first {
		if tenant == "heavy" {
			heavy++
		}
	}
	if heavy != 300 {
		t.Fatalf("heavy got %d of the first 400 dispatches, want 300 (3:1)", heavy)
	}
	for i := 0; i+4 <= len(first); i += 4 {
		if n := slices.Index(first[i:i+4], "light"); n < 0 {
			t.Fatalf("window %d..%d has no light dispatch: the share is bursty", i, i+4)
		}
	}
}

// Concurrency holds across rounds: never more claims in flight than the
// limit, whatever the local cap; the next round claims once one ends.
func TestQueueHonoursConcurrency(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, func(c *dispatch.QueueConfig) {
		c.Limits = store.QueueLimits{Concurrency: 2}
		c.MaxInFlight = 5
	})
	for i := range 6 {
		h.enqueue(t, fmt.Sprintf("x-%d", i), "")
	}
	if n := h.runOnce(t); n != 2 {
		t.Fatalf("claimed %d, want 2", n)
	}
	if n := h.runOnce(t); n != 0 {
		t.Fatalf("claimed %d with the limit reached", n)
	}
	// Both claims' dispatches are held before the first is answered, so
	// the dispatcher sees two at once whatever the scheduler does.
	pending := []heldCall{<-d.calls, <-d.calls}
	for done := 0; done < 6; done++ {
		call := pending[0]
		pending = pending[1:]
		call.answer <- nil
		if end := <-h.ends; end.err != nil || end.claim.Item.ExecutionID != call.pkg.ExecutionID {
			t.Fatalf("settled %+v, want %s completed", end, call.pkg.ExecutionID)
		}
		if n := h.runOnce(t); n > 0 {
			pending = append(pending, <-d.calls)
		}
		if got := h.q.InFlight(); got > 2 {
			t.Fatalf("%d in flight, want at most 2", got)
		}
	}
	if d.max() != 2 {
		t.Fatalf("max in flight %d, want 2", d.max())
	}
	if dep := h.depth(t); dep.Done != 6 {
		t.Fatalf("depth %+v, want 6 done", dep)
	}
}

// Without store limits, the local cap (MaxInFlight, or Limits.PerOwner)
// bounds what one node holds.
func TestQueueLocalCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*dispatch.QueueConfig)
	}{
		{"MaxInFlight", func(c *dispatch.QueueConfig) { c.MaxInFlight = 3 }},
		{"PerOwner", func(c *dispatch.QueueConfig) { c.Limits.PerOwner = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newHeld()
			h := newQueueHarness(t, d, tc.edit)
			for i := range 5 {
				h.enqueue(t, fmt.Sprintf("x-%d", i), "t")
			}
			if n := h.runOnce(t); n != 3 {
				t.Fatalf("claimed %d, want 3", n)
			}
			for range 5 {
				(<-d.calls).answer <- nil
				<-h.ends
				h.runOnce(t)
			}
		})
	}
}

// A transient failure releases the claim, and the next round dispatches
// the same start again (attempt 2) to completion.
func TestQueueReleasedClaimIsDispatchedAgain(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, nil)
	h.enqueue(t, "x-1", "")
	h.runOnce(t)
	transient := &loom.JournalError{ExecutionID: "x-1", Err: errors.New("disk full")}
	(<-d.calls).answer <- transient
	if end := <-h.ends; !end.released || !errors.Is(end.err, transient) || end.claim.Attempt != 1 {
		t.Fatalf("got %+v, want released after attempt 1", end)
	}
	if dep := h.depth(t); dep.Ready != 1 {
		t.Fatalf("depth %+v, want the item ready again", dep)
	}
	if n := h.runOnce(t); n != 1 {
		t.Fatalf("claimed %d, want the released item", n)
	}
	call := <-d.calls
	call.answer <- nil
	if end := <-h.ends; end.released || end.err != nil || end.claim.Attempt != 2 || call.pkg.ExecutionID != "x-1" {
		t.Fatalf("got %+v, want x-1 settled on attempt 2", end)
	}
}

// A dispatch error is sorted: refusals of the start itself complete it
// (OnSettled reports them); failures that say nothing about the item
// release it; MaxAttempts transient failures complete it too.
func TestQueueSortsDispatchErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		released bool
	}{
		{"duplicate start", fmt.Errorf("starting: %w", loom.ErrExecutionExists), false},
		{"unknown flow", loom.ErrUnknownFlow, false},
		{"invalid package", &dispatch.PackageError{Field: "flowId", Reason: "bad"}, false},
		{"denied", &loom.ExecutionDeniedError{ExecutionID: "x-1", Reason: "no"}, false},
		{"open circuit", &dispatch.CircuitOpenError{Target: "w"}, true},
		{"restarts exhausted", &dispatch.RestartsExhaustedError{ExecutionID: "x-1", Attempts: 3, Err: errors.New("down")}, true},
		{"no healthy worker", &dispatch.NoWorkerError{ExecutionID: "x-1", Workers: 2}, true},
		{"runtime closed", loom.ErrRuntimeClosed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newHeld()
			h := newQueueHarness(t, d, nil)
			h.enqueue(t, "x-1", "")
			h.runOnce(t)
			(<-d.calls).answer <- tc.err
			end := <-h.ends
			if end.released != tc.released || !errors.Is(end.err, tc.err) {
				t.Fatalf("got %+v; want released=%v with %v", end, tc.released, tc.err)
			}
			want := store.QueueDepth{Done: 1}
			if tc.released {
				want = store.QueueDepth{Ready: 1}
			}
			if dep := h.depth(t); dep != want {
				t.Fatalf("depth %+v, want %+v", dep, want)
			}
		})
	}
	t.Run("attempts exhausted", func(t *testing.T) {
		d := newHeld()
		h := newQueueHarness(t, d, func(c *dispatch.QueueConfig) { c.MaxAttempts = 2 })
		h.enqueue(t, "x-1", "")
		down := errors.New("worker down")
		h.runOnce(t)
		(<-d.calls).answer <- down
		if end := <-h.ends; !end.released {
			t.Fatalf("attempt 1: %+v, want released", end)
		}
		h.runOnce(t)
		(<-d.calls).answer <- down
		end := <-h.ends
		var ex *dispatch.AttemptsExhaustedError
		if end.released || !errors.As(end.err, &ex) || ex.Attempts != 2 || !errors.Is(end.err, down) {
			t.Fatalf("got %+v, want settled with *AttemptsExhaustedError after 2", end)
		}
		if n := h.runOnce(t); n != 0 {
			t.Fatal("an exhausted item was claimed again")
		}
	})
}

// Enqueue is idempotent by execution id, generates one when none is
// given, and refuses a start no worker could run, storing nothing.
func TestQueueEnqueueIsIdempotent(t *testing.T) {
	h := newQueueHarness(t, completes, nil)
	ctx := t.Context()
	req := dispatch.EnqueueRequest{ExecutionID: "o-1", FlowID: "orders", Input: json.RawMessage(`{"n":1}`), Tenant: "acme"}
	for i, want := range []bool{true, false} {
		id, added, err := h.q.Enqueue(ctx, req)
		if err != nil || id != "o-1" || added != want {
			t.Fatalf("Enqueue #%d = %q, %v, %v; want o-1, %v", i+1, id, added, err, want)
		}
	}
	id, added, err := h.q.Enqueue(ctx, dispatch.EnqueueRequest{FlowID: "orders"})
	if err != nil || !added || id == "" || id == "o-1" {
		t.Fatalf("Enqueue without id = %q, %v, %v; want a new generated id", id, added, err)
	}
	if _, _, err := h.q.Enqueue(ctx, dispatch.EnqueueRequest{ExecutionID: "o-2"}); !errors.Is(err, dispatch.ErrInvalidPackage) {
		t.Fatalf("Enqueue without a flow: %v, want ErrInvalidPackage", err)
	}
	if _, _, err := h.q.Enqueue(ctx, dispatch.EnqueueRequest{ExecutionID: "o-3", FlowID: "orders", Input: json.RawMessage(`{`)}); !errors.Is(err, dispatch.ErrInvalidPackage) {
		t.Fatalf("Enqueue with bad input: %v, want ErrInvalidPackage", err)
	}
	if dep := h.depth(t); dep.Ready != 2 {
		t.Fatalf("depth %+v, want 2 ready", dep)
	}
	// A done item stays the idempotency record.
	for h.runOnce(t) > 0 {
	}
	<-h.ends
	<-h.ends
	if _, added, err := h.q.Enqueue(ctx, req); added || err != nil {
		t.Fatalf("re-Enqueue of a done id = %v, %v; want false, nil", added, err)
	}
}

// A dispatch that runs longer than ClaimTTL keeps its claim: RunOnce
// renews it every ClaimTTL/3 on the clock.
func TestQueueRenewsLiveClaims(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, nil) // ClaimTTL 3s
	h.enqueue(t, "x-1", "")
	h.runOnce(t)
	call := <-d.calls
	for range 6 {
		h.clock.advance(time.Second)
		h.runOnce(t)
		if dep := h.depth(t); dep.Claimed != 1 || dep.Ready != 0 {
			t.Fatalf("at %v: depth %+v, want the claim live", h.clock.Now(), dep)
		}
	}
	call.answer <- nil
	if end := <-h.ends; end.err != nil || end.released {
		t.Fatalf("got %+v, want completed", end)
	}
}

// A claim lost to another owner (here: it expired and another node
// claimed it) cancels its dispatch, which is then neither completed nor
// released here.
func TestQueueLostClaimCancelsItsDispatch(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, nil)
	h.enqueue(t, "x-1", "")
	h.runOnce(t)
	<-d.calls
	h.clock.advance(4 * time.Second) // past ClaimTTL without a renewal
	other, err := h.store.Claim(t.Context(), store.ClaimRequest{Queue: "starts", Owner: "node-2", Now: h.clock.Now().UnixMilli(), TTL: 3000, Max: 1})
	if err != nil || len(other) != 1 {
		t.Fatalf("node-2 claim: %v, %v", other, err)
	}
	h.runOnce(t) // the renewal finds the claim lost
	if end := <-h.ends; !end.released || !errors.Is(end.err, store.ErrClaimLost) {
		t.Fatalf("got %+v, want released with ErrClaimLost", end)
	}
	if err := h.store.Complete(t.Context(), other[0]); err != nil {
		t.Fatalf("node-2's claim was disturbed: %v", err)
	}
}

// Close stops claiming, waits for the dispatches in flight and returns
// once they settled; with an ended ctx it aborts them and releases their
// claims.
func TestQueueCloseWaitsForDispatches(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, nil)
	h.enqueue(t, "x-1", "")
	h.enqueue(t, "x-2", "")
	h.runOnce(t)
	calls := []heldCall{<-d.calls, <-d.calls}
	closed := make(chan error)
	go func() { closed <- h.q.Close(context.Background()) }()
	calls[0].answer <- nil
	calls[1].answer <- nil
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if len(h.ends) != 2 {
		t.Fatalf("Close returned with %d of 2 dispatches settled", len(h.ends))
	}
	if _, err := h.q.RunOnce(t.Context()); !errors.Is(err, dispatch.ErrQueueClosed) {
		t.Fatalf("RunOnce after Close: %v", err)
	}
	if _, _, err := h.q.Enqueue(t.Context(), dispatch.EnqueueRequest{ExecutionID: "x-3", FlowID: "f"}); !errors.Is(err, dispatch.ErrQueueClosed) {
		t.Fatalf("Enqueue after Close: %v", err)
	}
}

func TestQueueCloseWithEndedContextReleases(t *testing.T) {
	d := newHeld()
	h := newQueueHarness(t, d, nil)
	h.enqueue(t, "x-1", "")
	h.runOnce(t)
	<-d.calls
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.q.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v, want context.Canceled", err)
	}
	if end := <-h.ends; !end.released {
		t.Fatalf("got %+v, want the aborted claim released", end)
	}
	if dep := h.depth(t); dep.Ready != 1 {
		t.Fatalf("depth %+v, want the item ready for another node", dep)
	}
}

func TestNewQueueRefusesBadConfig(t *testing.T) {
	ok := dispatch.QueueConfig{Store: memstore.NewQueueStore(), Name: "q", Dispatcher: completes}
	for _, tc := range []struct {
		field string
		edit  func(*dispatch.QueueConfig)
	}{
		{"Store", func(c *dispatch.QueueConfig) { c.Store = nil }},
		{"Name", func(c *dispatch.QueueConfig) { c.Name = "" }},
		{"Dispatcher", func(c *dispatch.QueueConfig) { c.Dispatcher = nil }},
		{"Limits", func(c *dispatch.QueueConfig) { c.Limits.Concurrency = -1 }},
		{"Limits", func(c *dispatch.QueueConfig) { c.Limits.Rate = 5 }},
		{"ClaimTTL/Poll/DispatchTimeout", func(c *dispatch.QueueConfig) { c.Poll = -time.Second }},
		{"MaxInFlight/MaxAttempts", func(c *dispatch.QueueConfig) { c.MaxInFlight = -1 }},
	} {
		cfg := ok
		tc.edit(&cfg)
		_, err := dispatch.NewQueue(cfg)
		var ce *dispatch.QueueConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: got %v, want a *QueueConfigError for it", tc.field, err)
		}
	}
	cfg := ok
	cfg.Limits.PerOwner = -1
	_, err := dispatch.NewQueue(cfg)
	var le *store.QueueLimitsError
	if !errors.As(err, &le) || le.Field != "PerOwner" {
		t.Fatalf("got %v, want the store's *QueueLimitsError naming PerOwner", err)
	}
}

// Over a real runtime: queued starts run through a LocalWorker and
// complete; a queued start of an execution that exists already reports
// it as it stands; Run stops with its ctx.
func TestQueueRunsStartsOnARuntime(t *testing.T) {
	echo := loom.NewFlow("echo", func(ctx *loom.Context, in json.RawMessage) (json.RawMessage, error) {
		out, err := ctx.Run("echo", func(context.Context) (any, error) { return in, nil })
		return out, err
	})
	events := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{echo}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Start(t.Context(), "echo", json.RawMessage(`"first"`), loom.WithExecutionID("e-dup")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSettled(t.Context(), "e-dup"); err != nil {
		t.Fatal(err)
	}
	fair, _ := dispatch.NewFairScheduler(nil, 1)
	d := &dispatch.LocalDispatcher{Worker: &dispatch.LocalWorker{Runtime: rt}, MaxConcurrent: 4}
	h := newQueueHarness(t, d, func(c *dispatch.QueueConfig) {
		c.Scheduler, c.Limits, c.Clock = fair, store.QueueLimits{Concurrency: 3}, nil
	})
	const n = 12
	for i := range n {
		input := json.RawMessage(fmt.Sprintf(`%d`, i))
		if _, _, err := h.q.Enqueue(t.Context(), dispatch.EnqueueRequest{ExecutionID: fmt.Sprintf("e-%02d", i), FlowID: "echo",
			Input: input, Tenant: []string{"a", "b", "c"}[i%3]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := h.q.Enqueue(t.Context(), dispatch.EnqueueRequest{ExecutionID: "e-dup", FlowID: "echo", Input: json.RawMessage(`"second"`)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error)
	go func() { ran <- h.q.Run(ctx) }()
	outputs := map[string]string{}
	for range n + 1 {
		end := <-h.ends
		if end.err != nil || end.released || end.res.Status != fold.StatusCompleted {
			t.Fatalf("got %+v, want completed", end)
		}
		outputs[end.claim.Item.ExecutionID] = string(end.res.Output)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got, want := outputs[fmt.Sprintf("e-%02d", i)], fmt.Sprint(i); got != want {
			t.Errorf("e-%02d output %s, want %s", i, got, want)
		}
	}
	for i := range n {
		// Each queued start records its item's tenant, with the queue as
		// the starting principal.
		id := fmt.Sprintf("e-%02d", i)
		first, err := store.ReadRange(t.Context(), events, id, 0, 1)
		if err != nil || len(first) != 1 {
			t.Fatalf("%s: %v", id, err)
		}
		if got, want := store.TenantOf(first[0]), []string{"a", "b", "c"}[i%3]; got != want {
			t.Errorf("%s recorded tenant %q, want %q", id, got, want)
		}
	}
	if got := outputs["e-dup"]; got != `"first"` {
		t.Errorf("duplicate start reported %s, want the existing execution's \"first\"", got)
	}
	if dep := h.depth(t); dep.Done != n+1 {
		t.Fatalf("depth %+v, want %d done", dep, n+1)
	}
}
