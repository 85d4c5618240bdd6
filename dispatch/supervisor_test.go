package dispatch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
)

// fakeClock is the injected clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// scripted is a Dispatcher whose every call is answered by fn.
type scripted struct {
	mu    sync.Mutex
	calls int
	fn    func(call int, pkg dispatch.ExecutionPackage) error
}

func (s *scripted) Dispatch(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if err := s.fn(n, pkg); err != nil {
		return dispatch.ExecutionResult{}, err
	}
	return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted}, nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var errTransient = errors.New("connection reset")

// failFirst fails the first n calls with err.
func failFirst(n int, err error) func(int, dispatch.ExecutionPackage) error {
	return func(call int, _ dispatch.ExecutionPackage) error {
		if call <= n {
			return err
		}
		return nil
	}
}

// harness builds a supervisor over next on a fake clock whose Sleep records
// each backoff and advances the clock by it.
type harness struct {
	clock  *fakeClock
	sleeps []time.Duration
	s      *dispatch.SupervisingDispatcher
}

func newHarness(t *testing.T, next dispatch.Dispatcher, opts dispatch.SupervisorOptions) *harness {
	t.Helper()
	h := &harness{clock: &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	opts.Clock = h.clock
	opts.Sleep = func(ctx context.Context, d time.Duration) error {
		h.sleeps = append(h.sleeps, d)
		h.clock.advance(d)
		return ctx.Err()
	}
	s, err := dispatch.NewSupervisingDispatcher(next, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	return h
}

func TestSupervisorRestartsATransientFailure(t *testing.T) {
	next := &scripted{fn: failFirst(2, errTransient)}
	h := newHarness(t, next, dispatch.SupervisorOptions{})
	res, err := h.s.Dispatch(t.Context(), pkgN(1))
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("got %+v, %v; want the third attempt's result", res, err)
	}
	if next.count() != 3 || !slices.Equal(h.sleeps, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("%d attempts after backoffs %v, want 3 after [100ms 200ms]", next.count(), h.sleeps)
	}
	if st := h.s.BreakerState(""); st != dispatch.BreakerClosed {
		t.Fatalf("breaker %s after a success, want closed", st)
	}
}

// Backoff doubles from BaseBackoff, is capped at MaxBackoff, and after
// MaxRestarts restarts the last failure comes back wrapped.
func TestSupervisorBackoffScheduleAndExhaustion(t *testing.T) {
	next := &scripted{fn: failFirst(100, errTransient)}
	h := newHarness(t, next, dispatch.SupervisorOptions{MaxRestarts: 5, BaseBackoff: 100 * time.Millisecond,
		MaxBackoff: time.Second, FailureThreshold: 100})
	_, err := h.s.Dispatch(t.Context(), pkgN(1))
	var ex *dispatch.RestartsExhaustedError
	if !errors.As(err, &ex) || ex.Attempts != 6 || !errors.Is(err, errTransient) || !errors.Is(err, dispatch.ErrRestartsExhausted) {
		t.Fatalf("got %v, want *RestartsExhaustedError after 6 attempts wrapping the last failure", err)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}
	if !slices.Equal(h.sleeps, want) || next.count() != 6 {
		t.Fatalf("backoffs %v over %d attempts, want %v over 6", h.sleeps, next.count(), want)
	}
	if dispatch.IsRetryable(err) {
		t.Fatal("an exhausted dispatch is retryable by another supervisor")
	}
}

func TestSupervisorNeverRetriesARefusal(t *testing.T) {
	for name, refusal := range map[string]error{
		"gate mismatch": &loom.ResumeRefusedError{ExecutionID: "x", Reason: loom.RefusedGateMismatch},
		"unknown flow":  loom.ErrUnknownFlow,
		"4xx-like":      verdict(false),
	} {
		next := &scripted{fn: failFirst(1, refusal)}
		h := newHarness(t, next, dispatch.SupervisorOptions{FailureThreshold: 1})
		if _, err := h.s.Dispatch(t.Context(), pkgN(1)); !errors.Is(err, refusal) {
			t.Fatalf("%s: got %v, want the refusal itself", name, err)
		}
		if next.count() != 1 || len(h.sleeps) != 0 || h.s.BreakerState("") != dispatch.BreakerClosed {
			t.Fatalf("%s: %d attempts, backoffs %v, breaker %s; want 1, none, closed (the target answered)",
				name, next.count(), h.sleeps, h.s.BreakerState(""))
		}
	}
}

func TestSupervisorHonoursContextDuringBackoff(t *testing.T) {
	next := &scripted{fn: failFirst(100, errTransient)}
	ctx, cancel := context.WithCancel(t.Context())
	s, err := dispatch.NewSupervisingDispatcher(next, dispatch.SupervisorOptions{
		Sleep: func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Dispatch(ctx, pkgN(1)); !errors.Is(err, context.Canceled) || next.count() != 1 {
		t.Fatalf("got %v after %d attempts, want context.Canceled after 1", err, next.count())
	}
}

func TestSupervisorRefusesBadOptionsAndPackages(t *testing.T) {
	next := &scripted{fn: failFirst(0, nil)}
	for name, opts := range map[string]dispatch.SupervisorOptions{
		"negative backoff":   {BaseBackoff: -1},
		"negative cooldown":  {CoolDown: -time.Second},
		"negative threshold": {FailureThreshold: -1},
		"base above max":     {BaseBackoff: time.Minute, MaxBackoff: time.Second},
	} {
		var oe *dispatch.OptionsError
		if _, err := dispatch.NewSupervisingDispatcher(next, opts); !errors.As(err, &oe) {
			t.Errorf("%s: %v, want *OptionsError", name, err)
		}
	}
	if _, err := dispatch.NewSupervisingDispatcher(nil, dispatch.SupervisorOptions{}); err == nil {
		t.Error("a nil Dispatcher was accepted")
	}
	h := newHarness(t, next, dispatch.SupervisorOptions{})
	if _, err := h.s.Dispatch(t.Context(), dispatch.ExecutionPackage{FlowID: "f"}); !errors.Is(err, dispatch.ErrInvalidPackage) || next.count() != 0 {
		t.Fatalf("invalid package: %v after %d attempts, want ErrInvalidPackage before any", err, next.count())
	}
}
