package schedule

import (
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
)

// MaxCatchUp is the most ticks one Fire starts under CatchUp: a schedule
// that was down for a month starts at most this many executions when it
// comes back, never one per missed tick.
const MaxCatchUp = 1000

// MaxCountedSkips is the most skipped ticks one Fire counts for its Report;
// past it Report.SkippedCapped is set. It bounds the work a long outage of a
// frequent schedule costs, which counting one tick at a time would not.
const MaxCountedSkips = 10_000

// MissedMode says what Fire does with ticks that came due while no node
// fired the schedule (a restart, an outage, a slow poller).
type MissedMode int

const (
	// Skip starts only the latest due tick; the earlier ones are counted
	// in the Report and never started. The zero value.
	Skip MissedMode = iota
	// CatchUp starts the MissedPolicy.Max most recent due ticks, oldest
	// first; earlier ones are counted and never started.
	CatchUp
)

// String names the mode.
func (m MissedMode) String() string {
	switch m {
	case Skip:
		return "skip"
	case CatchUp:
		return "catch-up"
	}
	return fmt.Sprintf("MissedMode(%d)", int(m))
}

// MissedPolicy bounds what a late Fire starts. The zero value is Skip. Max
// is required with CatchUp (1 to MaxCatchUp) and ignored with Skip.
type MissedPolicy struct {
	Mode MissedMode
	Max  int
}

// limit is how many due ticks one Fire starts at most.
func (p MissedPolicy) limit() int {
	if p.Mode == CatchUp {
		return p.Max
	}
	return 1
}

// Schedule starts an execution of flow FlowID with Input at every tick of
// Expr read on Zone's wall clock. The execution's id is TickID(Name, tick),
// so a tick starts once however many nodes fire it.
type Schedule struct {
	// Name identifies the schedule in timer keys and execution ids; see
	// ValidateName. Keep it stable: a renamed schedule is a new schedule.
	Name string
	// Expr is a cron expression, 5 or 6 fields or a descriptor (see Parse).
	Expr string
	// Zone is the IANA zone whose wall clock Expr is read on ("UTC" for UTC).
	Zone string
	// FlowID is the registered flow each tick starts.
	FlowID string
	// Input is the input of every execution the schedule starts.
	Input any
	// Missed bounds what a late Fire starts (default Skip).
	Missed MissedPolicy
}

// compiled is a validated Schedule with its parsed expression.
type compiled struct {
	Schedule
	expr *Expr
}

// compile validates s: its name, expression and zone, flow id and missed
// policy. A refusal is an *InvalidScheduleError.
func (s Schedule) compile() (*compiled, error) {
	if err := ValidateName(s.Name); err != nil {
		return nil, err
	}
	refuse := func(field, reason string, err error) error {
		return &InvalidScheduleError{Name: s.Name, Field: field, Reason: reason, Err: err}
	}
	expr, err := Parse(s.Expr, s.Zone)
	if err != nil {
		var pe *ParseError
		errors.As(err, &pe)
		return nil, refuse("expr", pe.Reason, err)
	}
	if err := event.ValidateID("flow id", s.FlowID); err != nil {
		return nil, refuse("flowId", err.Error(), err)
	}
	switch m := s.Missed; {
	case m.Mode != Skip && m.Mode != CatchUp:
		return nil, refuse("missed", "unknown mode "+m.Mode.String(), nil)
	case m.Mode == CatchUp && m.Max < 1:
		return nil, refuse("missed", "catch-up needs Max >= 1", nil)
	case m.Mode == CatchUp && m.Max > MaxCatchUp:
		return nil, refuse("missed", fmt.Sprintf("catch-up Max above %d", MaxCatchUp), nil)
	}
	return &compiled{Schedule: s, expr: expr}, nil
}
