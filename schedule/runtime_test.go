package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/schedule"
	"github.com/loom-kernel/loom/store/memstore"
)

// fixedClock is a clock a test moves by hand.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fixedClock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// TestTwoNodesStartATickOnce runs two real runtimes ("nodes") over one event
// store and one timer store, each with its own Scheduler, and has both fire
// the same due timer at once: the tick's execution starts once, the flow
// body runs once, and one timer is left, at the next tick.
func TestTwoNodesStartATickOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, timers := memstore.NewEventStore(), memstore.NewTimerStore()
	defer func() { _ = timers.Close() }()
	var runs atomic.Int32
	newNode := func() *loom.Runtime {
		flow := loom.NewFlow("report", func(ctx *loom.Context, region string) (string, error) {
			runs.Add(1)
			return region + " " + ctx.ExecutionID(), nil
		})
		rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close() })
		return rt
	}
	clock := &fixedClock{now: time.Date(2024, 5, 1, 10, 20, 0, 0, time.UTC)}
	def := schedule.Schedule{Name: "report", Expr: "0 * * * *", Zone: "Europe/Berlin", FlowID: "report", Input: "eu"}
	var (
		runtimes []*loom.Runtime
		nodes    []*schedule.Scheduler
	)
	for range 2 {
		rt := newNode()
		s, err := schedule.NewScheduler(rt, timers, clock, def)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Init(ctx); err != nil {
			t.Fatal(err)
		}
		runtimes, nodes = append(runtimes, rt), append(nodes, s)
	}

	clock.set(time.Date(2024, 5, 1, 11, 0, 5, 0, time.UTC))
	fired, ok, err := timers.Get(ctx, schedule.TimerKey("report"))
	if err != nil || !ok {
		t.Fatalf("timer: %v %v", ok, err)
	}
	reports := make([]schedule.Report, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Go(func() { reports[i], errs[i] = s.FireReport(ctx, fired) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	started, existing := 0, 0
	for _, r := range reports {
		started += len(r.Started)
		existing += len(r.Existing)
	}
	if started != 1 || existing != 1 {
		t.Fatalf("started %d, existing %d across nodes; want 1 and 1: %+v", started, existing, reports)
	}

	id := schedule.TickID("report", time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC))
	for _, rt := range runtimes { // either node sees the execution, whichever drove it
		out, err := rt.WaitForCompletion(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != fold.StatusCompleted || string(out.Output) != `"eu sched:report:2024-05-01T11:00:00Z"` {
			t.Errorf("result %s %s", out.Status, out.Output)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the flow body ran %d times, want 1", n)
	}
	due, err := timers.Due(ctx, 1<<62, 0)
	if err != nil || len(due) != 1 || due[0].Key != "schedule:report" ||
		due[0].WakeAt != time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC).UnixMilli() {
		t.Errorf("timers %+v (%v), want one at 12:00Z", due, err)
	}
}

// TestRuntimePollerDrivesTheSchedule wires two nodes the way an application
// does — Config.Timers and HandleTimers(s.Prefix(), s.Fire) — and lets the
// runtimes' own FireDueTimers fire the schedule, concurrently: each tick
// starts once, the runtime's compare-and-delete keeps the moved timer, and
// after an outage Skip starts only the latest tick.
func TestRuntimePollerDrivesTheSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, timers := memstore.NewEventStore(), memstore.NewTimerStore()
	defer func() { _ = timers.Close() }()
	clock := &fixedClock{now: time.Date(2024, 5, 1, 10, 20, 0, 0, time.UTC)}
	def := schedule.Schedule{Name: "report", Expr: "0 * * * *", Zone: "Europe/Berlin", FlowID: "report"}
	var runtimes []*loom.Runtime
	for range 2 {
		flow := loom.NewFlow("report", func(ctx *loom.Context, _ any) (string, error) { return ctx.ExecutionID(), nil })
		rt, err := loom.New(loom.Config{Events: events, Timers: timers, TimerPoll: -1, Clock: clock, Flows: []*loom.Flow{flow}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Close() })
		s, err := schedule.NewScheduler(rt, timers, clock, def)
		if err != nil {
			t.Fatal(err)
		}
		rt.HandleTimers(s.Prefix(), s.Fire)
		if err := s.Init(ctx); err != nil {
			t.Fatal(err)
		}
		runtimes = append(runtimes, rt)
	}
	poll := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(runtimes))
		for i, rt := range runtimes {
			wg.Go(func() { _, errs[i] = rt.FireDueTimers(ctx) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(hour int) bool {
		t.Helper()
		id := schedule.TickID("report", time.Date(2024, 5, 1, hour, 0, 0, 0, time.UTC))
		_, err := runtimes[0].LoadState(ctx, id)
		if errors.Is(err, loom.ErrExecutionNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runtimes[1].WaitForCompletion(ctx, id); err != nil {
			t.Fatal(err)
		}
		return true
	}
	wantTimer := func(hour int) {
		t.Helper()
		due, err := timers.Due(ctx, 1<<62, 0)
		if err != nil || len(due) != 1 || due[0].WakeAt != time.Date(2024, 5, 1, hour, 0, 0, 0, time.UTC).UnixMilli() {
			t.Fatalf("timers %+v (%v), want one at %02d:00Z", due, err, hour)
		}
	}

	wantTimer(11)
	clock.set(time.Date(2024, 5, 1, 11, 0, 5, 0, time.UTC))
	poll()
	if !exists(11) {
		t.Error("the 11:00 tick did not start")
	}
	wantTimer(12)

	clock.set(time.Date(2024, 5, 1, 14, 30, 0, 0, time.UTC)) // 12:00, 13:00 and 14:00 missed
	poll()
	if exists(12) || exists(13) || !exists(14) {
		t.Errorf("after the outage: 12:00 %v, 13:00 %v, 14:00 %v; want only 14:00", exists(12), exists(13), exists(14))
	}
	wantTimer(15)
}
