package middleware

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/loom-kernel/loom/effect"
)

// MaxRetryAttempts is the most attempts RetryPolicy.MaxAttempts may ask for
// (a larger value is clamped to it): a limit on the loop, so a mistyped
// policy cannot hold a step, and its log, for ever.
const MaxRetryAttempts = 100

// The default backoff: DefaultBackoffBase doubling after every failed
// attempt, capped at DefaultBackoffCap.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffCap  = 30 * time.Second
	// DefaultMaxAttempts is RetryPolicy.MaxAttempts when unset.
	DefaultMaxAttempts = 3
)

// RetryPolicy configures Retry. Its zero value is the documented default
// set: 3 attempts, ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap),
// DefaultRetryable, and a timer that ends with the step's context.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one run of the step, the first
	// included: 1 never retries; 0 or less is DefaultMaxAttempts; more than
	// MaxRetryAttempts is MaxRetryAttempts.
	MaxAttempts int
	// Backoff returns the delay after the failed attempt numbered attempt
	// (the step's attempt, 1 for its first). Its result is recorded as
	// STEP_RETRYING.delayMs; a negative one is zero. A failure that carries
	// a hint (an error with a RetryDelay() time.Duration method, such as a
	// model API's Retry-After) waits at least the hint, at most
	// MaxRetryHint.
	Backoff func(attempt int64) time.Duration
	// Retryable reports whether a failure may be retried.
	Retryable func(error) bool
	// Sleep waits d, or less when ctx ends, and then returns ctx's error;
	// inject one in tests instead of pacing them with the wall clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Retry returns the retry ring: it runs the rest of the chain (the effect
// and the rings inside) and, while an attempt fails with a retryable error
// and attempts remain, records STEP_RETRYING through ec.Retrying — which
// moves ec to the next attempt and its new idempotency key — waits the
// policy's backoff and runs the chain again, within the same step id.
//
// Durable facts: one STEP_RETRYING {stepId, attempt, error: {message},
// delayMs} per retry, attempt being the number of the attempt about to run
// (the kernel writes it; see effect.Context.Retrying). The message is the
// failure's Error(), so rings inside Retry must not put secrets in errors
// (Redaction scrubs the errors it sees).
//
// Failure modes: when attempts run out, or the error is not retryable, the
// step fails with the last attempt's error, unchanged. When recording
// STEP_RETRYING fails or the wait is cut short by the step's context, the
// step fails with *RetryInterruptedError. A retry is not a new step: a
// deliberate retry of a settled step in flow code is Step.Retry(n), a new
// step id. On replay a completed step is served from the log and Retry
// never runs. After a crash mid-retry the kernel re-runs an idempotent step
// from the attempt its last STEP_RETRYING recorded (same idempotency key),
// with MaxAttempts attempts again, and parks a non-idempotent one in doubt
// under that attempt (for which STEP_RETRYING is made durable before the
// attempt runs).
func Retry(policy RetryPolicy) effect.Middleware {
	p := policy.withDefaults()
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		for n := 1; ; n++ {
			out, err := next(ec, in)
			// A cancelled step stops; an attempt that ran out of its own
			// time may be retried (each attempt has its own deadline).
			if err == nil || n >= p.MaxAttempts || errors.Is(ec.Ctx().Err(), context.Canceled) || !p.Retryable(err) {
				return out, err
			}
			failed := ec.Attempt
			delay := max(p.Backoff(failed), hintOf(err), 0)
			if rerr := ec.Retrying(err, delay); rerr != nil {
				return nil, &RetryInterruptedError{StepID: ec.StepID, Attempt: failed, Cause: err, Err: rerr}
			}
			if serr := p.Sleep(ec.Ctx(), delay); serr != nil {
				return nil, &RetryInterruptedError{StepID: ec.StepID, Attempt: failed, Cause: err, Err: serr}
			}
		}
	}
}

// MaxRetryHint caps the retry delay a failure's own hint may ask for.
const MaxRetryHint = 5 * time.Minute

// retryHinted is a failure that says how long to wait before the next try.
type retryHinted interface{ RetryDelay() time.Duration }

// hintOf is err's retry hint, capped at MaxRetryHint; 0 without one.
func hintOf(err error) time.Duration {
	var h retryHinted
	if !errors.As(err, &h) {
		return 0
	}
	return min(h.RetryDelay(), MaxRetryHint)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	switch {
	case p.MaxAttempts <= 0:
		p.MaxAttempts = DefaultMaxAttempts
	case p.MaxAttempts > MaxRetryAttempts:
		p.MaxAttempts = MaxRetryAttempts
	}
	if p.Backoff == nil {
		p.Backoff = ExponentialBackoff(DefaultBackoffBase, DefaultBackoffCap)
	}
	if p.Retryable == nil {
		p.Retryable = DefaultRetryable
	}
	if p.Sleep == nil {
		p.Sleep = sleepContext
	}
	return p
}

// ExponentialBackoff returns a Backoff of base after attempt 1, doubling
// after every later attempt, never more than limit (and never overflowing).
// It has no jitter: the delay is recorded, and the same policy gives the
// same log.
func ExponentialBackoff(base, limit time.Duration) func(attempt int64) time.Duration {
	return func(attempt int64) time.Duration {
		d := base
		for i := int64(1); i < attempt && d < limit; i++ {
			d *= 2
		}
		return min(d, limit)
	}
}

// DefaultRetryable retries every failure except: a typed failure on a
// declared channel (an error with a TypedChannel() string method, as
// *loom.TypedFailure has), the end of the step's context (context.Canceled,
// context.DeadlineExceeded), an authority denial (effect.ErrCapabilityDenied)
// and this package's refusals that another attempt cannot change
// (*QuotaExceededError, *SafetyBlockedError, an unknown secret's
// *SecretError, …).
func DefaultRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, effect.ErrCapabilityDenied) {
		return false
	}
	var typed typedChannel
	if errors.As(err, &typed) {
		return false
	}
	var perm permanentError
	return !errors.As(err, &perm) || !perm.permanent()
}

// sleepContext is the default Sleep: a timer, stopped when ctx ends first.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
