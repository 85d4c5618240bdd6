package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loom-kernel/loom/dispatch"
)

// breakerOpts: no restarts, so each Dispatch is one attempt and the breaker
// arithmetic reads directly off the calls.
var breakerOpts = dispatch.SupervisorOptions{MaxRestarts: -1, FailureThreshold: 3, CoolDown: 30 * time.Second}

// tripped returns a harness whose breaker for "" has just opened.
func tripped(t *testing.T, next *scripted) *harness {
	t.Helper()
	h := newHarness(t, next, breakerOpts)
	for i := range 3 {
		if st := h.s.BreakerState(""); st != dispatch.BreakerClosed {
			t.Fatalf("breaker %s after %d failures, want closed below the threshold", st, i)
		}
		if _, err := h.s.Dispatch(t.Context(), pkgN(i)); !errors.Is(err, errTransient) {
			t.Fatalf("attempt %d: %v, want the failure itself", i, err)
		}
	}
	if st := h.s.BreakerState(""); st != dispatch.BreakerOpen {
		t.Fatalf("breaker %s after 3 consecutive failures, want open", st)
	}
	return h
}

func TestBreakerOpensAfterConsecutiveFailuresAndFailsFast(t *testing.T) {
	next := &scripted{fn: failFirst(100, errTransient)}
	h := tripped(t, next)
	opened := h.clock.Now()
	h.clock.advance(30*time.Second - time.Millisecond)
	_, err := h.s.Dispatch(t.Context(), pkgN(9))
	var open *dispatch.CircuitOpenError
	if !errors.As(err, &open) || open.State != dispatch.BreakerOpen || !open.RetryAt.Equal(opened.Add(30*time.Second)) {
		t.Fatalf("dispatch inside the cool-down: %v, want *CircuitOpenError until %v", err, opened.Add(30*time.Second))
	}
	if next.count() != 3 || dispatch.IsRetryable(err) || !errors.Is(err, dispatch.ErrCircuitOpen) {
		t.Fatalf("%d calls (want 3: fail-fast never reaches the target), retryable %v", next.count(), dispatch.IsRetryable(err))
	}
}

// A success resets the count: only consecutive failures open the breaker.
func TestBreakerCountsConsecutiveFailuresOnly(t *testing.T) {
	next := &scripted{fn: func(call int, _ dispatch.ExecutionPackage) error {
		if call%3 == 0 {
			return nil
		}
		return errTransient
	}}
	h := newHarness(t, next, breakerOpts)
	for i := range 9 {
		_, _ = h.s.Dispatch(t.Context(), pkgN(i))
	}
	if st := h.s.BreakerState(""); st != dispatch.BreakerClosed || next.count() != 9 {
		t.Fatalf("breaker %s after fail,fail,ok ×3 (%d calls), want closed", st, next.count())
	}
}

func TestBreakerHalfOpenProbeClosesOnSuccess(t *testing.T) {
	probing, release := make(chan struct{}), make(chan struct{})
	next := &scripted{fn: func(call int, _ dispatch.ExecutionPackage) error {
		if call <= 3 {
			return errTransient
		}
		if call == 4 {
			close(probing)
			<-release
		}
		return nil
	}}
	h := tripped(t, next)
	h.clock.advance(30 * time.Second)
	probe := make(chan error, 1)
	go func() { _, err := h.s.Dispatch(context.Background(), pkgN(4)); probe <- err }()
	<-probing
	if st := h.s.BreakerState(""); st != dispatch.BreakerHalfOpen {
		t.Fatalf("breaker %s with its probe in flight, want half-open", st)
	}
	_, err := h.s.Dispatch(t.Context(), pkgN(5))
	var open *dispatch.CircuitOpenError
	if !errors.As(err, &open) || open.State != dispatch.BreakerHalfOpen {
		t.Fatalf("dispatch beside the probe: %v, want a half-open fail-fast", err)
	}
	close(release)
	if err := <-probe; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if st := h.s.BreakerState(""); st != dispatch.BreakerClosed {
		t.Fatalf("breaker %s after a successful probe, want closed", st)
	}
	if _, err := h.s.Dispatch(t.Context(), pkgN(6)); err != nil || next.count() != 5 {
		t.Fatalf("after closing: %v with %d calls, want a dispatch through (5 calls)", err, next.count())
	}
}

func TestBreakerFailedProbeReopensForAFreshCoolDown(t *testing.T) {
	next := &scripted{fn: failFirst(4, errTransient)}
	h := tripped(t, next)
	h.clock.advance(31 * time.Second)
	probedAt := h.clock.Now()
	if _, err := h.s.Dispatch(t.Context(), pkgN(4)); !errors.Is(err, errTransient) {
		t.Fatalf("probe: %v, want its failure", err)
	}
	if st := h.s.BreakerState(""); st != dispatch.BreakerOpen {
		t.Fatalf("breaker %s after a failed probe, want open", st)
	}
	_, err := h.s.Dispatch(t.Context(), pkgN(5))
	var open *dispatch.CircuitOpenError
	if !errors.As(err, &open) || !open.RetryAt.Equal(probedAt.Add(30*time.Second)) {
		t.Fatalf("after a failed probe: %v, want open until %v", err, probedAt.Add(30*time.Second))
	}
	h.clock.advance(30 * time.Second)
	if _, err := h.s.Dispatch(t.Context(), pkgN(6)); err != nil || h.s.BreakerState("") != dispatch.BreakerClosed {
		t.Fatalf("second probe: %v, breaker %s; want success and closed", err, h.s.BreakerState(""))
	}
}

// A probe whose caller gave up proves nothing: the next dispatch probes.
func TestBreakerAbandonedProbeLetsTheNextDispatchProbe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	next := &scripted{fn: func(call int, _ dispatch.ExecutionPackage) error {
		switch {
		case call <= 3:
			return errTransient
		case call == 4:
			cancel()
			return context.Canceled
		}
		return nil
	}}
	h := tripped(t, next)
	h.clock.advance(30 * time.Second)
	if _, err := h.s.Dispatch(ctx, pkgN(4)); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned probe: %v", err)
	}
	if _, err := h.s.Dispatch(t.Context(), pkgN(5)); err != nil || h.s.BreakerState("") != dispatch.BreakerClosed {
		t.Fatalf("next probe: %v, breaker %s; want success and closed", err, h.s.BreakerState(""))
	}
}

// Breakers are per target: one failing target does not stop another.
func TestBreakerIsPerTarget(t *testing.T) {
	next := &scripted{fn: func(_ int, pkg dispatch.ExecutionPackage) error {
		if pkg.FlowID == "sick" {
			return errTransient
		}
		return nil
	}}
	opts := breakerOpts
	opts.TargetOf = func(p dispatch.ExecutionPackage) string { return p.FlowID }
	h := newHarness(t, next, opts)
	sick := dispatch.ExecutionPackage{ExecutionID: "s", FlowID: "sick"}
	for range 3 {
		_, _ = h.s.Dispatch(t.Context(), sick)
	}
	if _, err := h.s.Dispatch(t.Context(), sick); !errors.Is(err, dispatch.ErrCircuitOpen) {
		t.Fatalf("sick target: %v, want fail-fast", err)
	}
	if _, err := h.s.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "h", FlowID: "healthy"}); err != nil {
		t.Fatalf("healthy target: %v", err)
	}
	if h.s.BreakerState("sick") != dispatch.BreakerOpen || h.s.BreakerState("healthy") != dispatch.BreakerClosed {
		t.Fatalf("breakers sick=%s healthy=%s, want open and closed", h.s.BreakerState("sick"), h.s.BreakerState("healthy"))
	}
}

// Restarts go through the breaker too: once it opens, the remaining restarts
// fail fast instead of hammering the target, carrying the last failure.
func TestBreakerStopsRestartsOnceOpen(t *testing.T) {
	next := &scripted{fn: failFirst(100, errTransient)}
	h := newHarness(t, next, dispatch.SupervisorOptions{MaxRestarts: 10, FailureThreshold: 2, CoolDown: time.Hour})
	_, err := h.s.Dispatch(t.Context(), pkgN(1))
	var open *dispatch.CircuitOpenError
	if !errors.As(err, &open) || !errors.Is(err, errTransient) || next.count() != 2 {
		t.Fatalf("got %v after %d calls, want a fail-fast wrapping the last failure after 2", err, next.count())
	}
}
