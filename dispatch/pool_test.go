package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/dispatch/dispatchtest"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

// heldWorker is a WorkerRuntime whose calls wait for the test to answer,
// reporting them on calls (shared by every worker of a test).
type heldWorker struct {
	index int
	calls chan workerCall
}

type workerCall struct {
	worker int
	pkg    dispatch.ExecutionPackage
	answer chan error
}

func (w *heldWorker) Execute(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	call := workerCall{worker: w.index, pkg: pkg, answer: make(chan error, 1)}
	w.calls <- call
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

func heldWorkers(n int) ([]dispatch.WorkerRuntime, chan workerCall) {
	calls := make(chan workerCall, 64)
	ws := make([]dispatch.WorkerRuntime, n)
	for i := range ws {
		ws[i] = &heldWorker{index: i, calls: calls}
	}
	return ws, calls
}

// connRefused is what a dial to a closed port fails with.
var connRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

type dispatchOutcome struct {
	res dispatch.ExecutionResult
	err error
}

func dispatchAsync(t *testing.T, p *dispatch.Pool, id string) chan dispatchOutcome {
	out := make(chan dispatchOutcome, 1)
	go func() {
		res, err := p.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: id, FlowID: "f"})
		out <- dispatchOutcome{res, err}
	}()
	return out
}

// Each package goes to the worker with the fewest in flight, the lowest
// index on a tie; a full worker (Capacity) is skipped, and a Dispatch with
// all full waits for a slot.
func TestPoolPlacesOnTheLeastLoadedWorker(t *testing.T) {
	ws, calls := heldWorkers(3)
	p, err := dispatch.NewPool(dispatch.PoolConfig{Workers: ws, Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	var held []workerCall
	var outs []chan dispatchOutcome
	for i := range 6 {
		outs = append(outs, dispatchAsync(t, p, fmt.Sprintf("x-%d", i)))
		c := <-calls // one at a time, so each sees the load before it
		got = append(got, c.worker)
		held = append(held, c)
	}
	if want := []int{0, 1, 2, 0, 1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("placed on %v, want %v", got, want)
	}
	waiting := dispatchAsync(t, p, "x-6") // every worker is at Capacity
	held[4].answer <- nil                 // worker 1 frees a slot
	if c := <-calls; c.worker != 1 || c.pkg.ExecutionID != "x-6" {
		t.Fatalf("the waiting package went to worker %d as %s, want worker 1", c.worker, c.pkg.ExecutionID)
	} else {
		c.answer <- nil
	}
	for i, c := range held {
		if i != 4 {
			c.answer <- nil
		}
	}
	for _, out := range append(outs, waiting) {
		if o := <-out; o.err != nil || o.res.Status != fold.StatusCompleted {
			t.Fatalf("got %+v", o)
		}
	}
}

// A transport failure marks the worker unhealthy and the same package runs
// on the next worker; the unhealthy one gets nothing until CheckHealth
// brings it back. A refusal or a flow failure is returned as it is.
func TestPoolFailsOverOnATransportError(t *testing.T) {
	ws, calls := heldWorkers(2)
	healthy := map[int]bool{}
	p, _ := dispatch.NewPool(dispatch.PoolConfig{Workers: ws, Health: func(_ context.Context, w dispatch.WorkerRuntime) error {
		if healthy[w.(*heldWorker).index] {
			return nil
		}
		return errors.New("still down")
	}})
	out := dispatchAsync(t, p, "x-1")
	first := <-calls
	first.answer <- &workerhttp.TransportError{ExecutionID: "x-1", Err: connRefused}
	second := <-calls
	if first.worker != 0 || second.worker != 1 || second.pkg.ExecutionID != "x-1" {
		t.Fatalf("tried workers %d then %d, want 0 then 1 with the same package", first.worker, second.worker)
	}
	second.answer <- nil
	if o := <-out; o.err != nil {
		t.Fatal(o.err)
	}
	if p.Healthy(0) || !p.Healthy(1) {
		t.Fatal("worker 0 should be unhealthy, worker 1 healthy")
	}
	out = dispatchAsync(t, p, "x-2")
	if c := <-calls; c.worker != 1 {
		t.Fatalf("placed on unhealthy worker %d", c.worker)
	} else {
		c.answer <- loom.ErrUnknownFlow // a refusal: the worker answered
	}
	if o := <-out; !errors.Is(o.err, loom.ErrUnknownFlow) || !p.Healthy(1) {
		t.Fatalf("got %v (worker 1 healthy: %v); want the refusal, and no failover", o.err, p.Healthy(1))
	}
	if n := p.CheckHealth(t.Context()); n != 1 || p.Healthy(0) {
		t.Fatalf("CheckHealth with worker 0 still down: %d healthy", n)
	}
	healthy[0] = true
	if n := p.CheckHealth(t.Context()); n != 2 || !p.Healthy(0) {
		t.Fatalf("CheckHealth: %d healthy, want 2", n)
	}
}

// With every worker unreachable, Dispatch says so with a retryable
// *NoWorkerError, and fails fast until CheckHealth brings one back
// (without Health: all of them).
func TestPoolAllUnhealthyIsATypedError(t *testing.T) {
	ws, calls := heldWorkers(2)
	p, _ := dispatch.NewPool(dispatch.PoolConfig{Workers: ws})
	out := dispatchAsync(t, p, "x-1")
	(<-calls).answer <- connRefused
	(<-calls).answer <- connRefused
	o := <-out
	var nw *dispatch.NoWorkerError
	if !errors.As(o.err, &nw) || nw.Workers != 2 || !errors.Is(o.err, syscall.ECONNREFUSED) ||
		!errors.Is(o.err, dispatch.ErrNoWorker) || !dispatch.IsRetryable(o.err) {
		t.Fatalf("got %v, want a retryable *NoWorkerError over the refused connection", o.err)
	}
	_, err := p.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "x-2", FlowID: "f"})
	if !errors.As(err, &nw) || nw.Err != nil {
		t.Fatalf("got %v, want a fail-fast *NoWorkerError", err)
	}
	if n := p.CheckHealth(t.Context()); n != 2 {
		t.Fatalf("CheckHealth without Health: %d healthy, want 2", n)
	}
}

// A real RemoteWorker at a closed port fails with a transport error the
// default Unreachable recognises; the pool moves the package to the
// in-process worker.
func TestPoolFailsOverFromAnUnreachableRemoteWorker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	remote, err := workerhttp.NewRemoteWorker("http://"+addr, workerhttp.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	echo := loom.NewFlow("echo", func(_ *loom.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	rt := newRuntime(t, []*loom.Flow{echo})
	p, _ := dispatch.NewPool(dispatch.PoolConfig{Workers: []dispatch.WorkerRuntime{remote, &dispatch.LocalWorker{Runtime: rt}}})
	res, err := p.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "r-1", FlowID: "echo", Input: []byte(`"hi"`)})
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != `"hi"` {
		t.Fatalf("got %+v, %v; want completed on the local worker", res, err)
	}
	if p.Healthy(0) {
		t.Fatal("the unreachable remote worker is still healthy")
	}
}

func TestNewPoolRefusesBadConfig(t *testing.T) {
	ws, _ := heldWorkers(1)
	for _, cfg := range []dispatch.PoolConfig{
		{},
		{Workers: []dispatch.WorkerRuntime{nil}},
		{Workers: ws, Capacity: -1},
		{Workers: make([]dispatch.WorkerRuntime, dispatch.MaxPoolWorkers+1)},
	} {
		var oe *dispatch.OptionsError
		if _, err := dispatch.NewPool(cfg); !errors.As(err, &oe) {
			t.Errorf("NewPool(%d workers, capacity %d): %v, want *OptionsError", len(cfg.Workers), cfg.Capacity, err)
		}
	}
}

// The Pool is a conformant Dispatcher. Its two workers share one
// LocalWorker (one per runtime coalesces duplicate starts), so placement
// varies while what the kit observes must not.
func TestSpec7DispatcherConformancePool(t *testing.T) {
	dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
		w := &dispatch.LocalWorker{Runtime: newRuntime(t, flows)}
		p, err := dispatch.NewPool(dispatch.PoolConfig{Workers: []dispatch.WorkerRuntime{w, w}, Capacity: 4})
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}
