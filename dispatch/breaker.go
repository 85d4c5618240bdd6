package dispatch

import (
	"strconv"
	"time"
)

// BreakerState is the state of one target's circuit breaker.
type BreakerState string

// The circuit breaker's states.
const (
	// BreakerClosed lets every dispatch through and counts consecutive
	// failures.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen fails every dispatch fast until the cool-down has passed.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen lets exactly one probe through; the others fail fast
	// until the probe's outcome closes or re-opens the breaker.
	BreakerHalfOpen BreakerState = "half-open"
)

// CircuitOpenError is the SupervisingDispatcher's fail-fast: the target's
// breaker is open (or half-open with its probe in flight), so the package
// was not dispatched and nothing ran. RetryAt is when the cool-down ends
// (for a half-open breaker, when it ended). Err, when set, is the failure of
// this same Dispatch call that preceded the fail-fast. It is not retryable:
// it exists so callers stop hammering a failing target.
type CircuitOpenError struct {
	Target  string
	State   BreakerState
	RetryAt time.Time
	Err     error
}

func (e *CircuitOpenError) Error() string {
	msg := "dispatch: circuit open for target " + strconv.Quote(e.Target)
	if e.State == BreakerHalfOpen {
		msg += " (half-open: a probe is in flight)"
	} else {
		msg += " until " + e.RetryAt.UTC().Format(time.RFC3339Nano)
	}
	if e.Err != nil {
		msg += " after: " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrCircuitOpen) true.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// Unwrap exposes the failure that preceded the fail-fast, if any.
func (e *CircuitOpenError) Unwrap() error { return e.Err }

// Retryable reports false: a breaker's fail-fast is not retried.
func (e *CircuitOpenError) Retryable() bool { return false }

// breaker is one target's circuit. A closed breaker with no failures has no
// entry at all, so the supervisor holds state only for failing targets.
//
// Transitions (gen changes on each, so an outcome admitted under an earlier
// state is ignored):
//
//	closed    --FailureThreshold consecutive failures--> open
//	open      --cool-down passed, next dispatch (probe)--> half-open
//	half-open --probe succeeds--> closed (entry dropped)
//	half-open --probe fails--> open (cool-down restarts)
//	half-open --probe abandoned (its ctx ended)--> half-open, next dispatch probes
type breaker struct {
	state    BreakerState
	failures int
	openedAt time.Time
	probing  bool
	gen      uint64
}

// ticket is what admit hands a dispatch attempt: the generation it was
// admitted under and whether it is the half-open probe.
type ticket struct {
	gen   uint64
	probe bool
}

// outcome is what an attempt reports to its breaker.
type outcome int

const (
	succeeded outcome = iota // the target answered (a refusal included)
	failed                   // a retryable failure: the target is unhealthy
	abandoned                // the caller's ctx ended: no evidence either way
)

// admit decides whether a dispatch to target may go out now. Callers hold
// s.mu.
func (s *SupervisingDispatcher) admit(target string, now time.Time) (ticket, *CircuitOpenError) {
	b := s.breakers[target]
	if b == nil || b.state == BreakerClosed {
		if b == nil {
			return ticket{}, nil
		}
		return ticket{gen: b.gen}, nil
	}
	retryAt := b.openedAt.Add(s.opts.CoolDown)
	switch {
	case b.state == BreakerOpen && now.Before(retryAt):
		return ticket{}, &CircuitOpenError{Target: target, State: BreakerOpen, RetryAt: retryAt}
	case b.state == BreakerHalfOpen && b.probing:
		return ticket{}, &CircuitOpenError{Target: target, State: BreakerHalfOpen, RetryAt: retryAt}
	}
	s.gen++
	b.state, b.probing, b.gen = BreakerHalfOpen, true, s.gen
	return ticket{gen: b.gen, probe: true}, nil
}

// record applies an attempt's outcome to target's breaker. Callers hold
// s.mu.
func (s *SupervisingDispatcher) record(target string, t ticket, o outcome, now time.Time) {
	b := s.breakers[target]
	cur := uint64(0)
	if b != nil {
		cur = b.gen
	}
	if t.gen != cur {
		return // admitted under an earlier state: stale evidence
	}
	switch o {
	case succeeded:
		delete(s.breakers, target)
	case abandoned:
		if t.probe {
			b.probing = false
		}
	case failed:
		if b == nil {
			b = &breaker{state: BreakerClosed}
			s.breakers[target] = b
		}
		b.failures++
		if t.probe || b.failures >= s.opts.FailureThreshold {
			s.gen++
			b.state, b.probing, b.openedAt, b.gen = BreakerOpen, false, now, s.gen
		}
	}
}

// BreakerState returns the state of target's breaker: BreakerClosed for a
// target that has not failed. An open breaker whose cool-down has passed
// still reads BreakerOpen until a dispatch probes it.
func (s *SupervisingDispatcher) BreakerState(target string) BreakerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.breakers[target]; b != nil {
		return b.state
	}
	return BreakerClosed
}
