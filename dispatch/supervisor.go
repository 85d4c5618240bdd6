package dispatch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
)

// Defaults of SupervisorOptions.
const (
	DefaultMaxRestarts      = 3
	DefaultBaseBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff       = 10 * time.Second
	DefaultFailureThreshold = 5
	DefaultCoolDown         = 30 * time.Second
)

// SupervisorOptions configures NewSupervisingDispatcher. The defaults (the
// zero value of each field):
//
//   - MaxRestarts: DefaultMaxRestarts (3) re-dispatches after the first
//     attempt; negative means none;
//   - BaseBackoff: DefaultBaseBackoff (100 ms) before the first restart,
//     doubling before each next one, capped at MaxBackoff: DefaultMaxBackoff
//     (10 s);
//   - FailureThreshold: DefaultFailureThreshold (5) consecutive failures
//     open a target's breaker, for CoolDown: DefaultCoolDown (30 s);
//   - TargetOf: every package goes to one target, "";
//   - Clock: loom.SystemClock;
//   - Sleep: a timer that ends early with ctx.
type SupervisorOptions struct {
	MaxRestarts      int
	BaseBackoff      time.Duration
	MaxBackoff       time.Duration
	FailureThreshold int
	CoolDown         time.Duration
	// TargetOf names the target a package is placed on, one breaker per
	// name: the flow id, a pinned compute target, the worker's URL. It must
	// mirror how the wrapped Dispatcher routes, and return few distinct
	// names (a breaker is kept for each failing one).
	TargetOf func(ExecutionPackage) string
	// Clock times the breakers' cool-downs.
	Clock loom.Clock
	// Sleep waits out a backoff; it returns ctx's error if ctx ends first.
	// Tests inject one that advances a fake Clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// OptionsError refuses a SupervisorOptions (or a missing Dispatcher): Field
// names it and Reason says what to do. Nothing was built.
type OptionsError struct {
	Field  string
	Reason string
}

func (e *OptionsError) Error() string { return "dispatch: " + e.Field + ": " + e.Reason }

// RestartsExhaustedError is returned when a package failed on every attempt
// (1 + MaxRestarts) with a retryable failure. Err is the last failure; the
// execution may have progressed anyway (a failure can come after the worker
// acted), so read its state before dispatching the package again. It is not
// retryable by another supervisor.
type RestartsExhaustedError struct {
	ExecutionID string
	Attempts    int
	Err         error
}

func (e *RestartsExhaustedError) Error() string {
	return "dispatch: execution " + strconv.Quote(e.ExecutionID) + ": " +
		strconv.Itoa(e.Attempts) + " attempts failed, last: " + e.Err.Error()
}

// Is makes errors.Is(err, ErrRestartsExhausted) true.
func (e *RestartsExhaustedError) Is(target error) bool { return target == ErrRestartsExhausted }

// Unwrap exposes the last failure.
func (e *RestartsExhaustedError) Unwrap() error { return e.Err }

// Retryable reports false: the supervisor already retried.
func (e *RestartsExhaustedError) Retryable() bool { return false }

// SupervisingDispatcher (K4) wraps a Dispatcher with restarts and circuit
// breakers:
//
//   - Restart with backoff. A dispatch that fails with a retryable error
//     (IsRetryable: a failed store write, an unreachable or 5xx worker) is
//     dispatched again, the same package, after BaseBackoff·2^(n-1) capped
//     at MaxBackoff before restart n, up to MaxRestarts times; then a
//     *RestartsExhaustedError. A refusal (invalid package, resume refused,
//     unknown flow, a 4xx) is returned at once, never retried. Restarting is
//     safe because packages are idempotent (see the package doc).
//   - Circuit breaker per target (TargetOf). FailureThreshold consecutive
//     retryable failures open it: every dispatch then fails fast with a
//     *CircuitOpenError, the wrapped Dispatcher not called, until CoolDown
//     has passed on Clock. The next dispatch is the half-open probe (others
//     still fail fast); its success closes the breaker, its failure opens
//     it for another CoolDown. A refusal counts as success — the target
//     answered — and an attempt whose ctx ended counts as nothing.
//
// A ctx that ends during an attempt or a backoff ends Dispatch with ctx's
// error. It is safe for concurrent use.
type SupervisingDispatcher struct {
	next Dispatcher
	opts SupervisorOptions

	mu       sync.Mutex
	breakers map[string]*breaker
	gen      uint64
}

// NewSupervisingDispatcher wraps next. It refuses a nil next, negative
// durations or threshold, and BaseBackoff above MaxBackoff with an
// *OptionsError.
func NewSupervisingDispatcher(next Dispatcher, opts SupervisorOptions) (*SupervisingDispatcher, error) {
	switch {
	case next == nil:
		return nil, &OptionsError{Field: "next", Reason: "a Dispatcher to supervise is required"}
	case opts.BaseBackoff < 0, opts.MaxBackoff < 0, opts.CoolDown < 0:
		return nil, &OptionsError{Field: "BaseBackoff/MaxBackoff/CoolDown", Reason: "must not be negative (zero means the default)"}
	case opts.FailureThreshold < 0:
		return nil, &OptionsError{Field: "FailureThreshold", Reason: "must not be negative (zero means the default)"}
	}
	if opts.MaxRestarts == 0 {
		opts.MaxRestarts = DefaultMaxRestarts
	} else if opts.MaxRestarts < 0 {
		opts.MaxRestarts = 0
	}
	if opts.BaseBackoff == 0 {
		opts.BaseBackoff = DefaultBaseBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.BaseBackoff)
	}
	if opts.BaseBackoff > opts.MaxBackoff {
		return nil, &OptionsError{Field: "BaseBackoff", Reason: "must not exceed MaxBackoff"}
	}
	if opts.FailureThreshold == 0 {
		opts.FailureThreshold = DefaultFailureThreshold
	}
	if opts.CoolDown == 0 {
		opts.CoolDown = DefaultCoolDown
	}
	if opts.TargetOf == nil {
		opts.TargetOf = func(ExecutionPackage) string { return "" }
	}
	if opts.Clock == nil {
		opts.Clock = loom.SystemClock{}
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	return &SupervisingDispatcher{next: next, opts: opts, breakers: map[string]*breaker{}}, nil
}

// Dispatch places pkg through the wrapped Dispatcher under supervision; see
// SupervisingDispatcher. An invalid package is refused with a *PackageError
// before any breaker sees it.
func (s *SupervisingDispatcher) Dispatch(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error) {
	if err := pkg.Validate(); err != nil {
		return ExecutionResult{}, err
	}
	target := s.opts.TargetOf(pkg)
	var last error
	for attempt := 1; ; attempt++ {
		s.mu.Lock()
		t, open := s.admit(target, s.opts.Clock.Now())
		s.mu.Unlock()
		if open != nil {
			open.Err = last
			return ExecutionResult{}, open
		}
		res, err := s.next.Dispatch(ctx, pkg)
		o := classify(ctx, err)
		s.mu.Lock()
		s.record(target, t, o, s.opts.Clock.Now())
		s.mu.Unlock()
		if o != failed {
			return res, err
		}
		last = err
		if attempt > s.opts.MaxRestarts {
			return ExecutionResult{}, &RestartsExhaustedError{ExecutionID: pkg.ExecutionID, Attempts: attempt, Err: err}
		}
		if err := s.opts.Sleep(ctx, s.backoff(attempt)); err != nil {
			return ExecutionResult{}, err
		}
	}
}

// classify turns an attempt's error into its breaker outcome.
func classify(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return succeeded
	case ctx.Err() != nil:
		return abandoned
	case IsRetryable(err):
		return failed
	default:
		return succeeded // a refusal: the target answered
	}
}

// backoff is the wait before restart n (1-based): BaseBackoff·2^(n-1),
// capped at MaxBackoff.
func (s *SupervisingDispatcher) backoff(n int) time.Duration {
	d := s.opts.BaseBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.opts.MaxBackoff)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
