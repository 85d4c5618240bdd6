package dispatch

import (
	"context"
	"errors"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

var (
	// ErrInvalidPackage matches every *PackageError: the package was refused
	// before any worker saw it, and nothing ran.
	ErrInvalidPackage = errors.New("dispatch: invalid execution package")
	// ErrNoWorker is returned by a LocalDispatcher without a Worker and a
	// LocalWorker without a Runtime.
	ErrNoWorker = errors.New("dispatch: no worker runtime")
	// ErrCircuitOpen matches every *CircuitOpenError.
	ErrCircuitOpen = errors.New("dispatch: circuit open")
	// ErrRestartsExhausted matches every *RestartsExhaustedError.
	ErrRestartsExhausted = errors.New("dispatch: restarts exhausted")
)

// PackageError refuses an ExecutionPackage: Field names the offending field,
// Reason says what is wrong, and Err, when set, is the kernel's own error
// (an *event.InvalidEnvelopeError or *event.PayloadTooLargeError, so
// errors.Is(err, event.ErrInvalidEnvelope) holds too). It never quotes the
// field's value. It is not retryable.
type PackageError struct {
	Field  string
	Reason string
	Err    error
}

func (e *PackageError) Error() string {
	msg := "dispatch: invalid execution package: " + e.Field + ": " + e.Reason
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalidPackage) true.
func (e *PackageError) Is(target error) bool { return target == ErrInvalidPackage }

// Unwrap exposes the kernel's error, when there is one.
func (e *PackageError) Unwrap() error { return e.Err }

// Retryable is implemented by errors that know whether sending the same
// package again may succeed: a transport's error (plugins/workerhttp says
// yes for a 5xx answer, no for a 4xx one), a breaker's fail-fast (no).
// IsRetryable and the SupervisingDispatcher honour it before any other rule.
type Retryable interface {
	Retryable() bool
}

// IsRetryable reports whether a dispatch that failed with err may succeed if
// the same package is dispatched again. In order:
//
//  1. the first error in the chain implementing Retryable decides;
//  2. a cancelled or expired context is not retried (the caller gave up);
//  3. refusals are not retried, since they would be refused again:
//     ErrInvalidPackage, event.ErrInvalidEnvelope, loom.ErrUnknownFlow,
//     loom.ErrExecutionNotFound, loom.ErrExecutionExists,
//     loom.ErrFeatureDisabled, loom.ErrRuntimeClosed (this runtime will not
//     reopen), *loom.ResumeRefusedError (except the "busy" reason),
//     *loom.ResumePayloadValidationError, *loom.ExecutionDeniedError,
//     ErrCircuitOpen and ErrRestartsExhausted;
//  4. anything else — a failed store write (*loom.JournalError), a lost
//     connection — is a transient failure and retryable.
//
// nil is not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var r Retryable
	if errors.As(err, &r) {
		return r.Retryable()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var refused *loom.ResumeRefusedError
	if errors.As(err, &refused) {
		return refused.Reason == loom.RefusedBusy
	}
	var invalid *loom.ResumePayloadValidationError
	var denied *loom.ExecutionDeniedError
	switch {
	case errors.As(err, &invalid), errors.As(err, &denied):
		return false
	}
	for _, refusal := range refusals {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return true
}

// refusals are the sentinels IsRetryable never retries.
var refusals = []error{
	ErrInvalidPackage, ErrNoWorker, ErrCircuitOpen, ErrRestartsExhausted,
	event.ErrInvalidEnvelope,
	loom.ErrUnknownFlow, loom.ErrExecutionNotFound, loom.ErrExecutionExists,
	loom.ErrFeatureDisabled, loom.ErrRuntimeClosed,
}
