package dispatch_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
)

// slowWorker holds every Execute until the test releases it, and records
// how many ran at once.
type slowWorker struct {
	inflight, peak, calls atomic.Int64
	entered               chan struct{}
	release               chan struct{}
}

func newSlowWorker() *slowWorker {
	return &slowWorker{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *slowWorker) Execute(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	w.calls.Add(1)
	n := w.inflight.Add(1)
	for p := w.peak.Load(); n > p && !w.peak.CompareAndSwap(p, n); p = w.peak.Load() {
	}
	defer w.inflight.Add(-1)
	w.entered <- struct{}{}
	select {
	case <-w.release:
	case <-ctx.Done():
		return dispatch.ExecutionResult{}, ctx.Err()
	}
	return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted}, nil
}

func pkgN(i int) dispatch.ExecutionPackage {
	return dispatch.ExecutionPackage{ExecutionID: "x-" + strconv.Itoa(i), FlowID: "f"}
}

// 100 concurrent dispatches through a bound of 5 onto a worker that holds
// each call until released: the test lets a call finish only when the bound
// is full, so every waiting dispatch gets its chance to break in, and the
// peak must still be exactly the bound.
func TestLocalDispatcherNeverExceedsItsBound(t *testing.T) {
	const total, bound = 100, 5
	w := newSlowWorker()
	d := &dispatch.LocalDispatcher{Worker: w, MaxConcurrent: bound}
	errs := make(chan error, total)
	for i := range total {
		go func() {
			res, err := d.Dispatch(t.Context(), pkgN(i))
			if err == nil && res.ExecutionID != pkgN(i).ExecutionID {
				err = errors.New("result for another execution: " + res.ExecutionID)
			}
			errs <- err
		}()
	}
	entered, released := 0, 0
	for released < total {
		if entered-released < bound && entered < total {
			<-w.entered
			entered++
			continue
		}
		if got := w.inflight.Load(); got != bound && entered < total {
			t.Fatalf("%d executions in flight with the bound full, want %d", got, bound)
		}
		w.release <- struct{}{}
		released++
	}
	for range total {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p := w.peak.Load(); p != bound {
		t.Fatalf("peak concurrency %d, want exactly the bound %d", p, bound)
	}
}

// A caller beyond the bound waits; when its ctx ends it gets ctx's error and
// the worker never sees its package.
func TestLocalDispatcherWaiterHonoursContext(t *testing.T) {
	w := newSlowWorker()
	d := &dispatch.LocalDispatcher{Worker: w, MaxConcurrent: 1}
	first := make(chan error, 1)
	go func() { _, err := d.Dispatch(t.Context(), pkgN(1)); first <- err }()
	<-w.entered

	ctx, cancel := context.WithCancel(t.Context())
	waiter := make(chan error, 1)
	go func() { _, err := d.Dispatch(ctx, pkgN(2)); waiter <- err }()
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting dispatch after cancel: %v, want context.Canceled", err)
	}
	w.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("worker called %d times, want 1 (the cancelled waiter never reaches it)", n)
	}
}

// An ended ctx never takes a slot, even a free one.
func TestLocalDispatcherEndedContextTakesNoSlot(t *testing.T) {
	w := newSlowWorker()
	d := &dispatch.LocalDispatcher{Worker: w, MaxConcurrent: 3}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := d.Dispatch(ctx, pkgN(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("dispatch with an ended ctx: %v, want context.Canceled", err)
	}
	if w.calls.Load() != 0 {
		t.Fatal("the worker saw a package dispatched with an ended ctx")
	}
}

// The zero MaxConcurrent is DefaultMaxConcurrent, not unbounded.
func TestLocalDispatcherDefaultBound(t *testing.T) {
	w := newSlowWorker()
	d := &dispatch.LocalDispatcher{Worker: w}
	const total = dispatch.DefaultMaxConcurrent + 1
	done := make(chan error, total)
	for i := range total {
		go func() { _, err := d.Dispatch(t.Context(), pkgN(i)); done <- err }()
	}
	for range dispatch.DefaultMaxConcurrent {
		<-w.entered
	}
	if got := w.inflight.Load(); got != dispatch.DefaultMaxConcurrent {
		t.Fatalf("%d in flight, want the default bound %d", got, dispatch.DefaultMaxConcurrent)
	}
	w.release <- struct{}{}
	<-w.entered // the one that waited
	for range dispatch.DefaultMaxConcurrent {
		w.release <- struct{}{}
	}
	for range total {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if p := w.peak.Load(); p != dispatch.DefaultMaxConcurrent {
		t.Fatalf("peak %d, want %d", p, dispatch.DefaultMaxConcurrent)
	}
}

func TestLocalDispatcherRefusesBeforeTheWorker(t *testing.T) {
	w := newSlowWorker()
	d := &dispatch.LocalDispatcher{Worker: w}
	if _, err := d.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "x"}); !errors.Is(err, dispatch.ErrInvalidPackage) {
		t.Fatalf("invalid package: %v, want dispatch.ErrInvalidPackage", err)
	}
	if w.calls.Load() != 0 {
		t.Fatal("the worker saw an invalid package")
	}
	var none dispatch.LocalDispatcher
	if _, err := none.Dispatch(t.Context(), pkgN(1)); !errors.Is(err, dispatch.ErrNoWorker) {
		t.Fatalf("no worker: %v, want dispatch.ErrNoWorker", err)
	}
}
