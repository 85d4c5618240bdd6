package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func hourly(missed MissedPolicy) Schedule {
	return Schedule{Name: "report", Expr: "0 * * * *", Zone: "Europe/Berlin", FlowID: "report", Input: "in", Missed: missed}
}

func TestInitPutsTheFirstTimerOnce(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	s := h.scheduler(hourly(MissedPolicy{}))
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantTimer("report", "2024-05-01T11:00:00Z")
	h.clock.Set(utc(t, "2024-05-01T13:30:00Z")) // down for hours: the cursor stays in the past
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantTimer("report", "2024-05-01T11:00:00Z")
	if s.Prefix() != "schedule:" {
		t.Errorf("Prefix = %q", s.Prefix())
	}
}

func TestInitPullsBackACursorPastTheNextTick(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	ctx := context.Background()
	if err := h.timers.Put(ctx, store.Timer{Key: TimerKey("report"), WakeAt: utc(t, "2024-05-02T00:00:00Z").UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if err := h.scheduler(hourly(MissedPolicy{})).Init(ctx); err != nil { // the schedule was daily, is now hourly
		t.Fatal(err)
	}
	h.wantTimer("report", "2024-05-01T11:00:00Z")
}

func TestFireOnTimeStartsTheTickAndMovesTheCursor(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	s := h.scheduler(hourly(MissedPolicy{}))
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T11:00:00.250Z"))
	rep, err := s.FireReport(ctx, h.timer("report"))
	if err != nil {
		t.Fatal(err)
	}
	h.wantStarted("report sched:report:2024-05-01T11:00:00Z")
	h.wantTimer("report", "2024-05-01T12:00:00Z")
	if rep.Schedule != "report" || len(rep.Started) != 1 || len(rep.Existing) != 0 || rep.Skipped != 0 ||
		!rep.Next.Equal(utc(t, "2024-05-01T12:00:00Z")) {
		t.Errorf("report %+v", rep)
	}
}

func TestFireLateSkipStartsOnlyTheLatest(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	s := h.scheduler(hourly(MissedPolicy{Mode: Skip}))
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T15:10:00Z")) // 11, 12, 13, 14 and 15 are due
	rep, err := s.FireReport(ctx, h.timer("report"))
	if err != nil {
		t.Fatal(err)
	}
	h.wantStarted("report sched:report:2024-05-01T15:00:00Z")
	h.wantTimer("report", "2024-05-01T16:00:00Z")
	if rep.Skipped != 4 || rep.SkippedCapped {
		t.Errorf("skipped %d (capped %v), want 4", rep.Skipped, rep.SkippedCapped)
	}
}

func TestFireLateCatchUpStartsAtMostMaxOldestFirst(t *testing.T) {
	for _, tc := range []struct {
		max     int
		want    []string
		skipped int
	}{
		{3, []string{"13", "14", "15"}, 2},
		{5, []string{"11", "12", "13", "14", "15"}, 0},
		{MaxCatchUp, []string{"11", "12", "13", "14", "15"}, 0},
	} {
		t.Run(fmt.Sprint("max ", tc.max), func(t *testing.T) {
			h := newHarness(t, "2024-05-01T10:20:00Z")
			s := h.scheduler(hourly(MissedPolicy{Mode: CatchUp, Max: tc.max}))
			ctx := context.Background()
			if err := s.Init(ctx); err != nil {
				t.Fatal(err)
			}
			h.clock.Set(utc(t, "2024-05-01T15:10:00Z"))
			rep, err := s.FireReport(ctx, h.timer("report"))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, hour := range tc.want {
				want = append(want, "report sched:report:2024-05-01T"+hour+":00:00Z")
			}
			h.wantStarted(want...)
			h.wantTimer("report", "2024-05-01T16:00:00Z")
			if rep.Skipped != tc.skipped || len(rep.Started) != len(tc.want) {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// TestFireTwiceStartsEachTickOnce is two nodes firing the same timer: the
// second finds every tick started and leaves the one timer where it is.
func TestFireTwiceStartsEachTickOnce(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	policy := MissedPolicy{Mode: CatchUp, Max: 10}
	nodeA, nodeB := h.scheduler(hourly(policy)), h.scheduler(hourly(policy))
	ctx := context.Background()
	if err := nodeA.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T12:05:00Z"))
	fired := h.timer("report")
	repA, errA := nodeA.FireReport(ctx, fired)
	repB, errB := nodeB.FireReport(ctx, fired)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	h.wantStarted("report sched:report:2024-05-01T11:00:00Z", "report sched:report:2024-05-01T12:00:00Z")
	h.wantTimer("report", "2024-05-01T13:00:00Z")
	if len(repA.Started) != 2 || len(repB.Started) != 0 || len(repB.Existing) != 2 {
		t.Errorf("A %+v\nB %+v", repA, repB)
	}
}

// TestFireConcurrentlyOnManyNodes races eight nodes on one timer.
func TestFireConcurrentlyOnManyNodes(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	policy := MissedPolicy{Mode: CatchUp, Max: 3}
	ctx := context.Background()
	if err := h.scheduler(hourly(policy)).Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T13:00:00Z"))
	fired := h.timer("report")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		node := h.scheduler(hourly(policy))
		wg.Go(func() { errs[i] = node.Fire(ctx, fired) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got := h.rt.Started()
	slices.Sort(got)
	want := []string{"report sched:report:2024-05-01T11:00:00Z", "report sched:report:2024-05-01T12:00:00Z",
		"report sched:report:2024-05-01T13:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("started %q, want %q", got, want)
	}
	h.wantTimer("report", "2024-05-01T14:00:00Z")
}

func TestFireAStartFailureKeepsTheTimerAndRetries(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	s := h.scheduler(hourly(MissedPolicy{Mode: CatchUp, Max: 2}))
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T12:00:00Z"))
	fired := h.timer("report")
	boom := errors.New("store down")
	h.rt.fail = boom
	_, err := s.FireReport(ctx, fired)
	var se *StartError
	if !errors.As(err, &se) || !errors.Is(err, boom) || se.Schedule != "report" || !se.Tick.Equal(utc(t, "2024-05-01T11:00:00Z")) {
		t.Fatalf("err = %v, want a *StartError for 11:00 wrapping the failure", err)
	}
	h.wantTimer("report", "2024-05-01T11:00:00Z")
	h.rt.fail = nil
	if err := s.Fire(ctx, fired); err != nil {
		t.Fatal(err)
	}
	h.wantStarted("report sched:report:2024-05-01T11:00:00Z", "report sched:report:2024-05-01T12:00:00Z")
	h.wantTimer("report", "2024-05-01T13:00:00Z")
}

func TestFireRefusesWhatIsNotItsOwn(t *testing.T) {
	h := newHarness(t, "2024-05-01T10:20:00Z")
	s := h.scheduler(hourly(MissedPolicy{}))
	ctx := context.Background()
	for _, key := range []string{"schedule:other", "park:report", "report", "schedule:"} {
		if err := s.Fire(ctx, store.Timer{Key: key, WakeAt: 1}); !errors.Is(err, ErrUnknownSchedule) {
			t.Errorf("Fire(%q) = %v, want ErrUnknownSchedule", key, err)
		}
	}
	early := store.Timer{Key: TimerKey("report"), WakeAt: utc(t, "2024-05-01T11:00:00Z").UnixMilli()}
	if err := s.Fire(ctx, early); !errors.Is(err, ErrNotDue) {
		t.Errorf("Fire(not due) = %v, want ErrNotDue", err)
	}
	h.wantStarted()
}

// TestFireNeverMovesTheCursorBack: a slow node firing an old timer after a
// faster one moved the cursor leaves the cursor alone.
func TestFireNeverMovesTheCursorBack(t *testing.T) {
	h := newHarness(t, "2024-05-01T11:00:30Z")
	s := h.scheduler(hourly(MissedPolicy{}))
	ctx := context.Background()
	old := store.Timer{Key: TimerKey("report"), WakeAt: utc(t, "2024-05-01T11:00:00Z").UnixMilli()}
	later := store.Timer{Key: TimerKey("report"), WakeAt: utc(t, "2024-05-01T14:00:00Z").UnixMilli()}
	if err := h.timers.Put(ctx, later); err != nil {
		t.Fatal(err)
	}
	rep, err := s.FireReport(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	h.wantTimer("report", "2024-05-01T14:00:00Z")
	if !rep.Next.Equal(utc(t, "2024-05-01T14:00:00Z")) {
		t.Errorf("report.Next = %v", rep.Next)
	}
}

// TestFireAcrossTheGap: a daily 02:30 in New York fires at 03:00 EDT on the
// spring-forward day, under the id of that instant.
func TestFireAcrossTheGap(t *testing.T) {
	h := newHarness(t, "2024-03-09T12:00:00Z")
	s := h.scheduler(Schedule{Name: "nightly", Expr: "30 2 * * *", Zone: "America/New_York", FlowID: "batch"})
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantTimer("nightly", "2024-03-10T07:00:00Z")
	h.clock.Set(utc(t, "2024-03-10T07:00:01Z"))
	if err := s.Fire(ctx, h.timer("nightly")); err != nil {
		t.Fatal(err)
	}
	h.wantStarted("batch sched:nightly:2024-03-10T07:00:00Z")
	h.wantTimer("nightly", "2024-03-11T06:30:00Z")
}

func TestFireCountsSkipsUpToTheCap(t *testing.T) {
	h := newHarness(t, "2024-05-01T00:00:00Z")
	s := h.scheduler(Schedule{Name: "s", Expr: "* * * * * *", Zone: "UTC", FlowID: "f"})
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(utc(t, "2024-05-01T03:00:00Z")) // 10800 ticks due
	rep, err := s.FireReport(ctx, h.timer("s"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != MaxCountedSkips || !rep.SkippedCapped || len(rep.Started) != 1 {
		t.Errorf("report: skipped %d capped %v started %d", rep.Skipped, rep.SkippedCapped, len(rep.Started))
	}
	h.wantTimer("s", "2024-05-01T03:00:01Z")
}

func TestNewSchedulerRefuses(t *testing.T) {
	ok := hourly(MissedPolicy{})
	with := func(f func(*Schedule)) Schedule { s := ok; f(&s); return s }
	cases := []struct {
		name  string
		sched []Schedule
		field string
	}{
		{"bad name", []Schedule{with(func(s *Schedule) { s.Name = "a:b" })}, "name"},
		{"empty name", []Schedule{with(func(s *Schedule) { s.Name = "" })}, "name"},
		{"twice", []Schedule{ok, ok}, "name"},
		{"bad expr", []Schedule{with(func(s *Schedule) { s.Expr = "61 * * * *" })}, "expr"},
		{"bad zone", []Schedule{with(func(s *Schedule) { s.Zone = "Nowhere/Else" })}, "expr"},
		{"no zone", []Schedule{with(func(s *Schedule) { s.Zone = "" })}, "expr"},
		{"no flow", []Schedule{with(func(s *Schedule) { s.FlowID = "" })}, "flowId"},
		{"control char flow", []Schedule{with(func(s *Schedule) { s.FlowID = "a\nb" })}, "flowId"},
		{"catch-up without max", []Schedule{with(func(s *Schedule) { s.Missed = MissedPolicy{Mode: CatchUp} })}, "missed"},
		{"catch-up negative", []Schedule{with(func(s *Schedule) { s.Missed = MissedPolicy{Mode: CatchUp, Max: -1} })}, "missed"},
		{"catch-up over ceiling", []Schedule{with(func(s *Schedule) { s.Missed = MissedPolicy{Mode: CatchUp, Max: MaxCatchUp + 1} })}, "missed"},
		{"unknown mode", []Schedule{with(func(s *Schedule) { s.Missed = MissedPolicy{Mode: 7} })}, "missed"},
	}
	timers := memstore.NewTimerStore()
	defer func() { _ = timers.Close() }()
	for _, tc := range cases {
		_, err := NewScheduler(&fakeStarter{}, timers, nil, tc.sched...)
		var ie *InvalidScheduleError
		if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want an *InvalidScheduleError on %s", tc.name, err, tc.field)
		}
		if tc.field == "expr" {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("%s: %v does not wrap a *ParseError", tc.name, err)
			}
		}
	}
	if _, err := NewScheduler(nil, timers, nil, ok); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil starter: %v", err)
	}
	if _, err := NewScheduler(&fakeStarter{}, nil, nil, ok); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("nil timers: %v", err)
	}
	if _, err := NewScheduler(&fakeStarter{}, timers, nil, ok, with(func(s *Schedule) { s.Name = "other" })); err != nil {
		t.Errorf("valid schedules refused: %v", err)
	}
}

func TestMissedModeString(t *testing.T) {
	if Skip.String() != "skip" || CatchUp.String() != "catch-up" || MissedMode(9).String() != "MissedMode(9)" {
		t.Error(Skip, CatchUp, MissedMode(9))
	}
}
