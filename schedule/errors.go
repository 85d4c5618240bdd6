package schedule

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalid matches every refusal of a schedule's definition: a
	// *ParseError and an *InvalidScheduleError.
	ErrInvalid = errors.New("schedule: invalid schedule")
	// ErrMissingDependency refuses NewScheduler without a Starter or a
	// TimerStore.
	ErrMissingDependency = errors.New("schedule: missing dependency")
	// ErrUnknownSchedule is returned by Fire for a timer whose key names no
	// schedule of this Scheduler (removed, or not yet deployed on this
	// node). The timer is left in place.
	ErrUnknownSchedule = errors.New("schedule: unknown schedule")
	// ErrNotDue is returned by Fire for a timer whose WakeAt is still ahead
	// of the scheduler's clock (a poller on a clock running ahead). Nothing
	// started; the timer is left in place for a later poll.
	ErrNotDue = errors.New("schedule: timer not due")
	// ErrNoNextTick is returned when an expression has no next tick within
	// its search bound: an assertion, since Parse refuses such expressions.
	// The timer is left in place.
	ErrNoNextTick = errors.New("schedule: no next tick")
)

// ParseError refuses a cron expression or a zone (see Parse). Reason says
// what is wrong; Expr and Zone are the input as given.
type ParseError struct {
	Expr   string
	Zone   string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("schedule: cannot parse %q in zone %q: %s", e.Expr, e.Zone, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ParseError) Is(target error) bool { return target == ErrInvalid }

// InvalidScheduleError refuses a Schedule given to NewScheduler: Field
// names what is wrong (name, expr, flowId, missed), Reason why. Err, when
// set, is the underlying error (a *ParseError for the expression or zone).
type InvalidScheduleError struct {
	Name   string
	Field  string
	Reason string
	Err    error
}

func (e *InvalidScheduleError) Error() string {
	return fmt.Sprintf("schedule: schedule %q: invalid %s: %s", e.Name, e.Field, e.Reason)
}

// Unwrap exposes the underlying error, if any.
func (e *InvalidScheduleError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidScheduleError) Is(target error) bool { return target == ErrInvalid }

// StartError reports that starting the execution of one tick failed for
// another reason than "already started". Ticks before it in the same Fire
// were started; the timer was not advanced, so the next poll retries, and
// the ticks already started are recognised by their ids.
type StartError struct {
	Schedule string
	Tick     time.Time
	Err      error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("schedule: schedule %q: starting tick %s: %v",
		e.Schedule, e.Tick.UTC().Format(tickLayout), e.Err)
}

// Unwrap exposes the Starter's error.
func (e *StartError) Unwrap() error { return e.Err }
