package loomtest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Time skipping. The Env's runtime has no background poller: time moves
// when the test moves it. Before each move, the Env waits until every
// execution is at rest (parked or ended: none running), so no flow still
// on its way to a Sleep reads the clock after the move. Each skip then
// moves the Clock to the earliest stored timer's wakeAt, fires what is
// then due through Runtime.FireDueTimers (the path the poller takes), and
// waits for rest again before it looks for the next timer. So timers fire
// in wake order, one instant at a time, a 30-day Sleep ends at once, and
// nothing sleeps on the wall clock.

// MaxSkippedTimers bounds the timers one SkipTime or AdvanceTime fires: a
// flow that arms timers forever fails the test instead of spinning.
const MaxSkippedTimers = 10_000

// maxListedTimers bounds how many stored timers a skip reads to find the
// execution's own.
const maxListedTimers = 10_000

// nextTimers lists the stored timers, earliest first (bounded).
func (e *Env) nextTimers(ctx context.Context) ([]store.Timer, error) {
	return e.timers.Due(ctx, math.MaxInt64, maxListedTimers)
}

// FireNextTimer waits until every execution is at rest, moves the clock
// to the earliest stored timer's wakeAt (never back), fires every timer
// then due, and waits for rest again. It returns the timer and true, or
// false when no timer is stored. A timer the runtime does not fire (its
// execution busy), a store error, or an execution that does not come to
// rest within the wait's bound (one a crash left running, say) fails t.
func (e *Env) FireNextTimer(t testing.TB) (store.Timer, bool) {
	t.Helper()
	e.settleAll(t)
	ctx, cancel := e.Context(t)
	defer cancel()
	next, err := e.nextTimers(ctx)
	if err != nil {
		t.Fatalf("loomtest: reading the timers: %v", err)
	}
	if len(next) == 0 {
		return store.Timer{}, false
	}
	e.fire(ctx, t, next[0])
	return next[0], true
}

// fire moves the clock to tm's instant, fires what is due, and waits for
// rest.
func (e *Env) fire(ctx context.Context, t testing.TB, tm store.Timer) {
	t.Helper()
	e.clock.advanceTo(time.UnixMilli(tm.WakeAt).UTC())
	n, err := e.Runtime().FireDueTimers(ctx)
	if err != nil {
		t.Fatalf("loomtest: firing the timer %s due at %s: %v", tm.Key, wakeTime(tm), err)
	}
	if n == 0 {
		t.Fatalf("loomtest: the timer %s due at %s was not fired (its execution was busy, or its handler failed)", tm.Key, wakeTime(tm))
	}
	e.settleAll(t)
}

// maxRestPasses bounds the passes settleAll makes: each pass waits for the
// executions it found running, which may start others (a child flow).
const maxRestPasses = 1000

// settleAll waits until no execution is running: every one the status
// index lists as unfinished is parked, or has ended since.
func (e *Env) settleAll(t testing.TB) {
	t.Helper()
	for range maxRestPasses {
		running := e.running(t)
		if len(running) == 0 {
			return
		}
		for _, id := range running {
			e.WaitForSettled(t, id)
		}
	}
	t.Fatalf("loomtest: executions kept starting through %d waits for rest", maxRestPasses)
}

// running lists the executions whose log says they are running.
func (e *Env) running(t testing.TB) []string {
	t.Helper()
	ctx, cancel := e.Context(t)
	defer cancel()
	var ids []string
	after := ""
	for {
		page, err := e.events.ListUnfinished(ctx, after, 256)
		if err != nil {
			t.Fatalf("loomtest: listing the unfinished executions: %v", err)
		}
		for _, x := range page.Executions {
			if x.Status == store.UnfinishedRunning {
				ids = append(ids, x.ExecutionID)
			}
		}
		if page.Next == "" {
			return ids
		}
		after = page.Next
	}
}

func wakeTime(tm store.Timer) string {
	return time.UnixMilli(tm.WakeAt).UTC().Format(time.RFC3339Nano)
}

// SkipTime lets time pass for execution id until nothing but an answer
// can move it: while id is parked with a timer of its own stored (a Sleep,
// a gate's Timeout, a Select timer, a deadline), it fires the earliest
// stored timer (FireNextTimer), whichever execution it wakes, so timers
// fire in wake order. It returns id's state once it has ended, or is
// parked with no timer of its own. It fails t past MaxSkippedTimers
// timers, or where FireNextTimer would.
func (e *Env) SkipTime(t testing.TB, id string) fold.State {
	t.Helper()
	for range MaxSkippedTimers {
		e.settleAll(t)
		st := e.WaitForSettled(t, id)
		if st.Status.Terminal() {
			return st
		}
		ctx, cancel := e.Context(t)
		next, err := e.nextTimers(ctx)
		if err != nil {
			cancel()
			t.Fatalf("loomtest: reading the timers: %v", err)
		}
		if !hasTimerOf(next, id) {
			cancel()
			return st
		}
		e.fire(ctx, t, next[0])
		cancel()
	}
	t.Fatalf("loomtest: execution %q: SkipTime fired %d timers and it still waits on one (a timer loop?)", id, MaxSkippedTimers)
	return fold.State{}
}

func hasTimerOf(timers []store.Timer, id string) bool {
	for _, tm := range timers {
		if tm.ExecutionID == id {
			return true
		}
	}
	return false
}

// AdvanceTime moves the clock forward by d, firing on the way, in wake
// order, every timer due by then (each at its own instant, with every
// execution at rest before and after), and leaves the clock at now+d, once
// every execution is at rest. It fails t past MaxSkippedTimers timers, or
// where FireNextTimer would.
func (e *Env) AdvanceTime(t testing.TB, d time.Duration) {
	t.Helper()
	e.settleAll(t)
	until := e.clock.Now().Add(d)
	for range MaxSkippedTimers {
		ctx, cancel := e.Context(t)
		next, err := e.timers.Due(ctx, until.UnixMilli(), 1)
		if err != nil {
			cancel()
			t.Fatalf("loomtest: reading the timers: %v", err)
		}
		if len(next) == 0 {
			cancel()
			e.clock.advanceTo(until)
			return
		}
		e.fire(ctx, t, next[0])
		cancel()
	}
	t.Fatalf("loomtest: AdvanceTime(%s) fired %d timers and more are due (a timer loop?)", d, MaxSkippedTimers)
}
