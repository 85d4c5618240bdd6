package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
)

// Starter starts a flow execution; *loom.Runtime satisfies it. Start must
// refuse a caller-chosen id that is already in use with an error matching
// loom.ErrExecutionExists, starting nothing: that refusal is what makes a
// tick fired by two nodes start once.
type Starter interface {
	Start(ctx context.Context, flowID string, input any, opts ...loom.StartOption) (string, error)
}

var _ Starter = (*loom.Runtime)(nil)

// Scheduler is the I/O shell around Expr: it keeps one durable timer per
// schedule, under TimerKey(name), whose WakeAt is the schedule's next tick
// (the timer is the schedule's cursor), and starts one execution per tick
// when the timer fires. It holds no other state, so any number of nodes may
// run a Scheduler over the same TimerStore and runtime store; it is safe for
// concurrent use.
//
// Wire it to a runtime's timer poller for the keys starting with Prefix,
// e.g. rt.HandleTimers(s.Prefix(), s.Fire), and call Init once at startup.
type Scheduler struct {
	rt     Starter
	timers store.TimerStore
	clock  loom.Clock
	byName map[string]*compiled
	names  []string // sorted, so Init visits schedules in a stable order
}

// NewScheduler validates schedules and returns their Scheduler. rt starts
// the executions, timers keeps the cursors, clock says what "now" is (nil:
// loom.SystemClock). It refuses a nil rt or timers (ErrMissingDependency),
// an invalid schedule and a name given twice (*InvalidScheduleError, which
// matches ErrInvalid). It touches no store: call Init.
func NewScheduler(rt Starter, timers store.TimerStore, clock loom.Clock, schedules ...Schedule) (*Scheduler, error) {
	switch {
	case rt == nil:
		return nil, fmt.Errorf("%w: nil Starter", ErrMissingDependency)
	case timers == nil:
		return nil, fmt.Errorf("%w: nil TimerStore", ErrMissingDependency)
	case clock == nil:
		clock = loom.SystemClock{}
	}
	s := &Scheduler{rt: rt, timers: timers, clock: clock, byName: make(map[string]*compiled, len(schedules))}
	for _, sc := range schedules {
		c, err := sc.compile()
		if err != nil {
			return nil, err
		}
		if _, dup := s.byName[sc.Name]; dup {
			return nil, &InvalidScheduleError{Name: sc.Name, Field: "name", Reason: "given twice"}
		}
		s.byName[sc.Name] = c
		s.names = append(s.names, sc.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// Prefix returns TimerPrefix, the key prefix of the timers Fire handles.
func (s *Scheduler) Prefix() string { return TimerPrefix }

// Init makes sure every schedule has its timer. A schedule without one gets
// one at its next tick after now. An existing timer is kept when its WakeAt
// is at or before that tick: a past WakeAt means ticks were missed, and the
// next Fire applies the missed policy to them. One later than that tick
// (the expression was edited to tick sooner) is pulled back to it. Init is
// idempotent and safe to run on every node at every start; it stops at the
// first store error, and running it again resumes.
func (s *Scheduler) Init(ctx context.Context) error {
	now := s.clock.Now()
	for _, name := range s.names {
		next := s.byName[name].expr.Next(now)
		if next.IsZero() {
			return fmt.Errorf("%w: schedule %q after %s", ErrNoNextTick, name, now.UTC().Format(tickLayout))
		}
		cur, ok, err := s.timers.Get(ctx, TimerKey(name))
		if err != nil {
			return fmt.Errorf("schedule: schedule %q: reading its timer: %w", name, err)
		}
		if ok && cur.WakeAt <= next.UnixMilli() {
			continue
		}
		if err := s.timers.Put(ctx, store.Timer{Key: TimerKey(name), WakeAt: next.UnixMilli()}); err != nil {
			return fmt.Errorf("schedule: schedule %q: storing its timer: %w", name, err)
		}
	}
	return nil
}

// Report says what one Fire did.
type Report struct {
	// Schedule is the schedule's name.
	Schedule string
	// Started are the ticks whose execution this call started, oldest first.
	Started []time.Time
	// Existing are due ticks whose execution already existed (another node
	// or an earlier, interrupted Fire started it): nothing was started.
	Existing []time.Time
	// Skipped counts the due ticks the missed policy left out, up to
	// MaxCountedSkips; SkippedCapped says the count stopped there.
	Skipped       int
	SkippedCapped bool
	// Next is where the schedule's timer points after the call.
	Next time.Time
}

// Fire is FireReport without the report: the loom.TimerHandler shape a
// runtime's timer poller calls.
func (s *Scheduler) Fire(ctx context.Context, t store.Timer) error {
	_, err := s.FireReport(ctx, t)
	return err
}

// FireReport handles a due schedule timer t. The due ticks are those in
// [t.WakeAt, now]; the missed policy picks the latest one (Skip) or the
// latest Max (CatchUp), oldest first, and the rest are counted as skipped.
// Each picked tick starts flow FlowID under the id TickID(name, tick); a
// start refused with loom.ErrExecutionExists means another node (or an
// earlier attempt) started that tick, and counts as done. Then the timer
// under t.Key is moved to the first tick after now; nothing is deleted.
//
// Failure modes, each leaving the timer where it was so the next poll
// retries (ticks already started are then recognised by their ids):
// ErrUnknownSchedule, ErrNotDue (t.WakeAt after now), a *StartError, a
// store error. A crash between the starts and the timer's move is the same
// retry. On success the timer holds a WakeAt after t.WakeAt, so a poller
// that deletes a fired timer only while it still holds t.WakeAt keeps it.
//
// Two nodes firing the same timer start each tick once and leave one timer.
// The timer never moves back: when it already points later than this call's
// next tick (a faster node moved it), it is left alone. Between that check
// and the write another node may still move it, so a cursor can move back
// by one race; the ticks it then refires are refused as existing.
func (s *Scheduler) FireReport(ctx context.Context, t store.Timer) (Report, error) {
	name, _ := strings.CutPrefix(t.Key, TimerPrefix)
	c, ok := s.byName[name]
	if !ok || !strings.HasPrefix(t.Key, TimerPrefix) {
		return Report{}, fmt.Errorf("%w: timer key %q", ErrUnknownSchedule, t.Key)
	}
	rep := Report{Schedule: name}
	now := s.clock.Now()
	if now.UnixMilli() < t.WakeAt {
		return rep, fmt.Errorf("%w: schedule %q wakes at %d, now is %d", ErrNotDue, name, t.WakeAt, now.UnixMilli())
	}
	since := time.UnixMilli(t.WakeAt).Add(-time.Millisecond) // due ticks are >= WakeAt
	due := c.expr.Ticks(since, now, c.Missed.limit())
	if len(due) > 0 {
		rep.Skipped, rep.SkippedCapped = c.expr.countTicks(since, due[0], MaxCountedSkips)
	}
	for _, tick := range due {
		_, err := s.rt.Start(ctx, c.FlowID, c.Input, loom.WithExecutionID(TickID(name, tick)))
		switch {
		case err == nil:
			rep.Started = append(rep.Started, tick)
		case errors.Is(err, loom.ErrExecutionExists):
			rep.Existing = append(rep.Existing, tick)
		default:
			return rep, &StartError{Schedule: name, Tick: tick, Err: err}
		}
	}
	next := c.expr.Next(now)
	if next.IsZero() {
		return rep, fmt.Errorf("%w: schedule %q after %s", ErrNoNextTick, name, now.UTC().Format(tickLayout))
	}
	at, err := s.advance(ctx, t.Key, next.UnixMilli())
	rep.Next = time.UnixMilli(at).In(c.expr.Location())
	if err != nil {
		return rep, fmt.Errorf("schedule: schedule %q: moving its timer: %w", name, err)
	}
	return rep, nil
}

// advance points the timer under key at wakeAt unless it already points
// later, and returns where it points.
func (s *Scheduler) advance(ctx context.Context, key string, wakeAt int64) (int64, error) {
	cur, ok, err := s.timers.Get(ctx, key)
	if err != nil {
		return wakeAt, err
	}
	if ok && cur.WakeAt > wakeAt {
		return cur.WakeAt, nil
	}
	return wakeAt, s.timers.Put(ctx, store.Timer{Key: key, WakeAt: wakeAt})
}
