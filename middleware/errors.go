package middleware

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// The rings' refusals are typed errors: the step fails with them (recorded
// as an untyped STEP_FAILED whose message is Error()), and the flow matches
// them with errors.As through the *loom.StepError it receives. None of their
// messages holds an effect's input, output or a secret value.

// QuotaExceededError is Metering's admission-control refusal (K3): the
// execution had already used Used of Dimension, at or over the budget's
// Limit, when the step's attempt was admitted. The effect did not run;
// QUOTA_EXCEEDED was recorded before the error was returned.
type QuotaExceededError struct {
	StepID    string
	Dimension string // a RESOURCE_METERED dimension: tokens, costUsd, ms, memBytes, wallMs, netBytes, or custom:<name>
	Limit     float64
	Used      float64
}

func (e *QuotaExceededError) Error() string {
	return "middleware: step " + strconv.Quote(e.StepID) + " denied: " + quotaReason(e.Dimension, e.Limit, e.Used)
}

func (e *QuotaExceededError) permanent() bool { return true }

func quotaReason(dim string, limit, used float64) string {
	return dim + " budget " + event.FormatJSNumber(limit) + " reached (" + event.FormatJSNumber(used) + " used)"
}

// UsageError refuses a Report whose amount is negative, not finite, over
// fold.MaxMeteredValue, or whose custom dimension name is invalid. Nothing
// of that Report is recorded.
type UsageError struct {
	Dimension string
	Reason    string
}

func (e *UsageError) Error() string {
	return "middleware: usage " + strconv.Quote(e.Dimension) + " refused: " + e.Reason
}

func (e *UsageError) permanent() bool { return true }

// Phases a validator runs in; SAFETY_BLOCKED records which one blocked.
const (
	PhaseInput  = "input"
	PhaseOutput = "output"
)

// SafetyBlockedError is Safety's refusal (K6): Validator found the step's
// input (Phase "input": the effect never ran) or its output (Phase
// "output": the effect ran, its output was discarded and not recorded)
// unsafe. SAFETY_BLOCKED was recorded before the error was returned. Reason
// is the validator's error message cut to fold.MaxReasonBytes; Err is the
// validator's error itself.
type SafetyBlockedError struct {
	StepID    string
	Validator string
	Phase     string
	Reason    string
	Err       error
}

func (e *SafetyBlockedError) Error() string {
	return "middleware: step " + strconv.Quote(e.StepID) + " blocked by validator " + strconv.Quote(e.Validator) +
		" on its " + e.Phase + ": " + e.Reason
}

// Unwrap returns the validator's error.
func (e *SafetyBlockedError) Unwrap() error { return e.Err }

func (e *SafetyBlockedError) permanent() bool { return true }

// ErrUnknownSecret is what a SecretResolver returns (or wraps) for a name it
// does not hold; a *SecretError carrying it matches it with errors.Is.
var ErrUnknownSecret = errors.New("middleware: unknown secret")

// ErrInvalidSecretRef matches a *SecretError for a malformed reference: a
// name that is not a string of 1 to MaxSecretNameBytes bytes, or one
// reference more than MaxSecretRefs.
var ErrInvalidSecretRef = errors.New("middleware: invalid secret reference")

// SecretError is Redaction's refusal to run an effect whose input holds a
// secret reference it could not resolve: Name is the reference's name, Err
// why (errors.Is(err, ErrUnknownSecret) for a name the resolver does not
// hold, ErrInvalidSecretRef for a malformed reference, else the resolver's
// own error). The effect did not run. The message names the secret, never
// a value, and does not repeat a resolver's error (reach it with errors.As).
type SecretError struct {
	StepID string
	Name   string
	Err    error
}

func (e *SecretError) Error() string {
	msg := "middleware: step " + strconv.Quote(e.StepID) + ": secret " + strconv.Quote(e.Name)
	switch {
	case errors.Is(e.Err, ErrUnknownSecret):
		return msg + " is unknown"
	case errors.Is(e.Err, ErrInvalidSecretRef):
		return msg + ": " + e.Err.Error()
	}
	return msg + " could not be resolved"
}

// Unwrap returns why the secret was not resolved.
func (e *SecretError) Unwrap() error { return e.Err }

// permanent: an unknown name or a malformed reference stays so on a retry;
// a resolver that failed otherwise (a vault timing out) may answer the next
// attempt.
func (e *SecretError) permanent() bool {
	return errors.Is(e.Err, ErrUnknownSecret) || errors.Is(e.Err, ErrInvalidSecretRef)
}

// ClaimCheckError is ClaimCheck's failure to claim an over-cap output: the
// content store refused or failed the Put (Err), or the Digest projection
// returned something that is not a small JSON value (Err nil). The effect
// ran; its output was not recorded.
type ClaimCheckError struct {
	StepID string
	Reason string
	Err    error
}

func (e *ClaimCheckError) Error() string {
	msg := "middleware: step " + strconv.Quote(e.StepID) + ": claim check failed: " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the content store's error, if any.
func (e *ClaimCheckError) Unwrap() error { return e.Err }

// permanent: a bad digest or an over-cap or closed store fails every
// attempt alike; a store I/O error may not.
func (e *ClaimCheckError) permanent() bool {
	var tooLarge *event.PayloadTooLargeError
	return e.Err == nil || errors.As(e.Err, &tooLarge) || errors.Is(e.Err, store.ErrClosed)
}

// RetryInterruptedError ends Retry's loop between two attempts: recording
// STEP_RETRYING failed, or the wait before the next attempt ended early (the
// step's context was cancelled or its deadline passed). Cause is the
// failure that would have been retried; Err is what interrupted, and is
// what errors.Is/As see (context.Canceled, context.DeadlineExceeded, a
// journal error).
type RetryInterruptedError struct {
	StepID  string
	Attempt int64 // the attempt that failed with Cause
	Cause   error
	Err     error
}

func (e *RetryInterruptedError) Error() string {
	return "middleware: retry of step " + strconv.Quote(e.StepID) + " after attempt " +
		strconv.FormatInt(e.Attempt, 10) + " interrupted: " + e.Err.Error() + " (attempt failed: " + e.Cause.Error() + ")"
}

// Unwrap returns what interrupted the retry.
func (e *RetryInterruptedError) Unwrap() error { return e.Err }

func (e *RetryInterruptedError) permanent() bool { return true }

// permanentError is implemented by this package's errors that a retry
// cannot change.
type permanentError interface{ permanent() bool }

// typedChannel is implemented by the kernel's *loom.TypedFailure: a failure
// on a declared channel is an answer, not a fault, and is never retried.
// The interface keeps this package free of the root package.
type typedChannel interface{ TypedChannel() string }

// bounded cuts s to fold.MaxReasonBytes on a rune boundary: the most a
// QUOTA_EXCEEDED or SAFETY_BLOCKED reason may hold (spec §5).
func bounded(s string) string {
	if len(s) <= fold.MaxReasonBytes {
		return s
	}
	cut := fold.MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
