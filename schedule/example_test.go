package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/schedule"
	"github.com/loom-kernel/loom/store/memstore"
)

// ExampleParse prints the three ticks of a daily 02:30 in Berlin around the
// spring-forward night of 2024: 02:30 does not exist on March 31st, so that
// day's tick is at the first valid instant after the gap, 03:00 CEST.
func ExampleParse() {
	e, err := schedule.Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		fmt.Println(err)
		return
	}
	t := time.Date(2024, time.March, 29, 12, 0, 0, 0, time.UTC)
	for range 3 {
		t = e.Next(t)
		fmt.Println(t.Format("2006-01-02 15:04 MST"), "=", t.UTC().Format(time.RFC3339))
	}
	// Output:
	// 2024-03-30 02:30 CET = 2024-03-30T01:30:00Z
	// 2024-03-31 03:00 CEST = 2024-03-31T01:00:00Z
	// 2024-04-01 02:30 CEST = 2024-04-01T00:30:00Z
}

// ExampleExpr_Next shows the fall-back night: 02:30 happens twice in Berlin
// on October 27th, 2024, and ticks once, at its first occurrence (CEST).
func ExampleExpr_Next() {
	e, _ := schedule.Parse("30 2 * * *", "Europe/Berlin")
	t := time.Date(2024, time.October, 26, 12, 0, 0, 0, time.UTC)
	for range 2 {
		t = e.Next(t)
		fmt.Println(t.Format("2006-01-02 15:04 MST"))
	}
	// Output:
	// 2024-10-27 02:30 CEST
	// 2024-10-28 02:30 CET
}

// ExampleTickID shows the execution id of a tick and its inverse.
func ExampleTickID() {
	e, _ := schedule.Parse("30 2 * * *", "America/New_York")
	tick := e.Next(time.Date(2024, time.March, 9, 12, 0, 0, 0, time.UTC))
	id := schedule.TickID("nightly", tick)
	fmt.Println(id)
	name, at, ok := schedule.ParseTickID(id)
	fmt.Println(name, at.In(e.Location()).Format("15:04 MST"), ok)
	// Output:
	// sched:nightly:2024-03-10T07:00:00Z
	// nightly 03:00 EDT true
}

// stopped is a clock standing still, for the example.
type stopped time.Time

func (s stopped) Now() time.Time { return time.Time(s) }

// ExampleNewScheduler wires a Scheduler to a runtime: Init stores the
// schedule's timer, and firing it once it is due starts the tick's
// execution. A runtime's timer poller calls Fire for the keys starting
// with Prefix; here the timer is fired by hand.
func ExampleNewScheduler() {
	flow := loom.NewFlow("digest", func(ctx *loom.Context, to string) (string, error) {
		return "digest sent to " + to, nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	timers := memstore.NewTimerStore()
	defer timers.Close()
	ctx := context.Background()

	daily := schedule.Schedule{Name: "digest", Expr: "0 8 * * MON-FRI", Zone: "Europe/Paris",
		FlowID: "digest", Input: "team@example.com", Missed: schedule.MissedPolicy{Mode: schedule.CatchUp, Max: 3}}
	friday := time.Date(2024, time.May, 3, 5, 30, 0, 0, time.UTC) // 07:30 in Paris
	s, err := schedule.NewScheduler(rt, timers, stopped(friday), daily)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Init(ctx)
	timer, _, _ := timers.Get(ctx, schedule.TimerKey("digest"))
	fmt.Println("first tick:", time.UnixMilli(timer.WakeAt).UTC().Format(time.RFC3339))

	later, _ := schedule.NewScheduler(rt, timers, stopped(friday.Add(time.Hour)), daily)
	report, err := later.FireReport(ctx, timer)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tick := range report.Started {
		res, _ := rt.WaitForCompletion(ctx, schedule.TickID("digest", tick))
		fmt.Println(schedule.TickID("digest", tick), res.Status, string(res.Output))
	}
	fmt.Println("next tick:", report.Next.Format("Mon 2006-01-02 15:04 MST"))
	// Output:
	// first tick: 2024-05-03T06:00:00Z
	// sched:digest:2024-05-03T06:00:00Z completed "digest sent to team@example.com"
	// next tick: Mon 2024-05-06 08:00 CEST
}
