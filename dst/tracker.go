package dst

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
)

// tracker is the loom.Observer of a process's runtime. It hears nothing
// but drives and operations: which executions have a drive open (launched,
// not yet parked, ended or aborted) or a transaction in flight, so the
// simulator knows which running executions someone drives and which a
// crash or an abort left with no driver. It records nothing in the log
// (TraceContext is nil).
type tracker struct {
	mu      sync.Mutex
	live    map[string]int // brackets open, drives and operations
	ops     map[string]int // operation brackets open
	opened  map[string]int // brackets ever opened, by execution
	aborted map[string]int // drives that stopped without an outcome: the generation then
	changed chan struct{}
}

var _ loom.Observer = (*tracker)(nil)

func newTracker() *tracker {
	return &tracker{live: map[string]int{}, ops: map[string]int{}, opened: map[string]int{}, aborted: map[string]int{},
		changed: make(chan struct{})}
}

// Drive implements loom.Observer: it counts the drive open until it ends.
func (t *tracker) Drive(ctx context.Context, d loom.DriveInfo) (context.Context, func(loom.DriveEnd)) {
	end := t.open(d.ExecutionID)
	return ctx, func(e loom.DriveEnd) {
		// An operation already in flight on the id claims it once the
		// runtime lets go of the drive: no need to wait for that.
		t.mu.Lock()
		if e.Err != nil && t.live[d.ExecutionID] == 1 {
			t.aborted[d.ExecutionID] = t.opened[d.ExecutionID]
		}
		t.mu.Unlock()
		end()
	}
}

// Operation implements loom.Observer: it counts the operation open (its
// transaction, from the claim to the launch of its drive) until it ends,
// so a transaction the kernel runs on its own (a parent answered after its
// child ended) is waited for like a drive.
func (t *tracker) Operation(ctx context.Context, op loom.Operation) (context.Context, func(error)) {
	t.mu.Lock()
	t.ops[op.ExecutionID]++
	t.mu.Unlock()
	end := t.open(op.ExecutionID)
	return ctx, func(error) {
		t.mu.Lock()
		if t.ops[op.ExecutionID]--; t.ops[op.ExecutionID] <= 0 {
			delete(t.ops, op.ExecutionID)
		}
		t.mu.Unlock()
		end()
	}
}

// open counts one bracket of id open and returns what closes it (once).
func (t *tracker) open(id string) func() {
	t.mu.Lock()
	t.live[id]++
	t.opened[id]++
	t.signalLocked()
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.live[id]--; t.live[id] <= 0 {
				delete(t.live, id)
			}
			t.signalLocked()
		})
	}
}

func (t *tracker) signalLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// takeAborted returns, and forgets, the executions whose drive stopped
// without an outcome, have no bracket open and had none opened since, in
// id order. (One opened since has claimed the id, so the runtime had let
// go of the aborted drive.)
func (t *tracker) takeAborted() (ids []string, gens []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, gen := range t.aborted { //loom:sorted below
		if t.live[id] == 0 && t.opened[id] == gen {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		gens = append(gens, t.aborted[id])
	}
	clear(t.aborted)
	return ids, gens
}

// waitOpsEnded waits until no operation of id is open.
func (t *tracker) waitOpsEnded(ctx context.Context, id string) error {
	return t.waitUntil(ctx, func() bool { return t.ops[id] == 0 })
}

// waitOpened waits until a bracket of id opens after generation gen.
func (t *tracker) waitOpened(ctx context.Context, id string, gen int) error {
	return t.waitUntil(ctx, func() bool { return t.opened[id] != gen })
}

// waitUntil waits until done, called with t.mu held, holds.
func (t *tracker) waitUntil(ctx context.Context, done func() bool) error {
	for {
		t.mu.Lock()
		ok, ch := done(), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isLive reports whether a drive or an operation of id is open.
func (t *tracker) isLive(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[id] > 0
}

// liveIDs returns the executions with a drive or an operation open, in
// id order.
func (t *tracker) liveIDs() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.live))
	for id := range t.live { //loom:sorted below
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// waitEnded waits until no drive or operation of id is open.
func (t *tracker) waitEnded(ctx context.Context, id string) error {
	return t.waitUntil(ctx, func() bool { return t.live[id] == 0 })
}

// StepAttempt implements loom.Observer; it observes nothing (the effect
// ledger counts attempts, in the middleware ring).
func (t *tracker) StepAttempt(ctx context.Context, _ loom.StepAttempt) (context.Context, func(error)) {
	return ctx, func(error) {}
}

// Append implements loom.Observer; it observes nothing.
func (t *tracker) Append(context.Context, string, int) func(error) { return func(error) {} }

// TimerFired implements loom.Observer; it observes nothing.
func (t *tracker) TimerFired(context.Context, string, time.Duration) {}

// LeaseTakenOver implements loom.Observer; it observes nothing.
func (t *tracker) LeaseTakenOver(context.Context, string, string) {}

// TraceContext implements loom.Observer: no trace is recorded.
func (t *tracker) TraceContext(context.Context) map[string]string { return nil }
