package loom

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/loom-kernel/loom/fold"
)

var (
	// ErrExecutionExists is returned by Start for a caller-chosen id that is
	// already in use; nothing ran and nothing was appended (ADR 0103).
	ErrExecutionExists = errors.New("loom: execution exists")
	// ErrExecutionNotFound is returned for an id with no log.
	ErrExecutionNotFound = errors.New("loom: execution not found")
	// ErrUnknownFlow is returned for a flow id that is not registered.
	ErrUnknownFlow = errors.New("loom: unknown flow")
	// ErrRuntimeClosed is returned by every call on a closed Runtime.
	ErrRuntimeClosed = errors.New("loom: runtime closed")
	// ErrReservedDecisionID refuses ctx.Decide ids starting with "__loom_".
	ErrReservedDecisionID = errors.New("loom: decision ids starting with __loom_ are reserved")
	// ErrEmitRefused matches *EmitRefusedError.
	ErrEmitRefused = errors.New("loom: emit refused")
)

// ResumeRefusedError is the ingress gate's refusal (spec §5). Nothing was
// appended; the execution is unchanged and, if parked, still resumable.
type ResumeRefusedError struct {
	ExecutionID string
	Reason      RefusalReason
	Detail      string
}

// RefusalReason names why a resume was refused.
type RefusalReason string

// The ingress gate's refusal reasons.
const (
	RefusedKernelEventType  RefusalReason = "kernel-event-type"
	RefusedNotSuspended     RefusalReason = "not-suspended"
	RefusedGateMismatch     RefusalReason = "gate-mismatch"
	RefusedNotRecoverable   RefusalReason = "not-recoverable"
	RefusedNullAfterFailure RefusalReason = "null-answer-after-parked-failure"
	RefusedTimerNotDue      RefusalReason = "timer-not-allowed"
	RefusedTerminal         RefusalReason = "terminal"
	RefusedUnauthenticated  RefusalReason = "unauthenticated"
	RefusedBusy             RefusalReason = "busy"
)

func (e *ResumeRefusedError) Error() string {
	s := "loom: resume of " + strconv.Quote(e.ExecutionID) + " refused: " + string(e.Reason)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// ResumePayloadValidationError is returned when a resume's payload fails the
// gate's resume schema, or an in-doubt park receives anything but a verdict
// for the parked step. Nothing was appended.
type ResumePayloadValidationError struct {
	ExecutionID string
	Gate        string
	Detail      string
}

func (e *ResumePayloadValidationError) Error() string {
	return "loom: resume payload for gate " + strconv.Quote(e.Gate) + " of " +
		strconv.Quote(e.ExecutionID) + " is invalid: " + e.Detail
}

// ExecutionDeniedError is the execution authorizer's refusal of a start,
// resume, cancel or query. The denial is recorded as EXECUTION_DENIED on an
// existing execution; nothing else is appended.
type ExecutionDeniedError struct {
	ExecutionID string
	Action      string
	Reason      string
}

func (e *ExecutionDeniedError) Error() string {
	return "loom: " + e.Action + " of " + strconv.Quote(e.ExecutionID) + " denied: " + e.Reason
}

// ExecutionTerminatedError is returned by WaitForSuspend when the execution
// ended instead of parking (ADR 0135). State is its final folded state.
type ExecutionTerminatedError struct {
	ExecutionID string
	Status      fold.Status
	State       fold.State
}

func (e *ExecutionTerminatedError) Error() string {
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " terminated (" + string(e.Status) + ") without suspending"
}

// JournalError reports that a durable append failed. The run was aborted at
// the next barrier; the log holds everything before Sequence.
type JournalError struct {
	ExecutionID string
	Sequence    int64
	Err         error
}

func (e *JournalError) Error() string {
	return "loom: journal of " + strconv.Quote(e.ExecutionID) + " failed at sequence " +
		strconv.FormatInt(e.Sequence, 10) + ": " + e.Err.Error()
}

// Unwrap exposes the store's error.
func (e *JournalError) Unwrap() error { return e.Err }

// TypedFailure is a step failure on a declared error channel (spec §4.1).
// Returned by a step on a channel its definition declares, it is recorded as
// STEP_FAILED{channel, payload} and re-returned on replay without running the
// step again. Use errors.As to branch on it.
type TypedFailure struct {
	Channel string
	Payload json.RawMessage
}

func (e *TypedFailure) Error() string {
	return "loom: typed failure on channel " + strconv.Quote(e.Channel)
}

// TypedChannel returns the failure's channel. It lets packages that do not
// import loom (the middleware rings) recognise a typed failure with
// errors.As on interface{ TypedChannel() string }: an answer on a declared
// channel, which a retry must not repeat.
func (e *TypedFailure) TypedChannel() string { return e.Channel }

// Fail returns a *TypedFailure on channel with payload encoded as JSON.
func Fail(channel string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		b = nil
	}
	return &TypedFailure{Channel: channel, Payload: b}
}

// StepError is a step's untyped failure as the flow sees it. Err is the
// effect's own error (untyped failures are re-run on replay, so it is always
// the live one).
type StepError struct {
	StepID  string
	Message string
	Err     error
}

func (e *StepError) Error() string {
	return "loom: step " + strconv.Quote(e.StepID) + " failed: " + e.Message
}

// Unwrap exposes the effect's error.
func (e *StepError) Unwrap() error { return e.Err }

// EmitRefusedError refuses a userspace emit of a kernel event type, or an
// allowed kernel type whose payload fails validation (spec §5). Nothing was
// appended.
type EmitRefusedError struct {
	EventType string
	Reason    string
}

func (e *EmitRefusedError) Error() string {
	return "loom: emit of " + strconv.Quote(e.EventType) + " refused: " + e.Reason
}

// Is makes errors.Is(err, ErrEmitRefused) true.
func (e *EmitRefusedError) Is(target error) bool { return target == ErrEmitRefused }

// FlowFailedError is what Wait returns for an execution that ended in
// EXECUTION_FAILED; Message is the recorded error's message.
type FlowFailedError struct {
	ExecutionID string
	Message     string
}

func (e *FlowFailedError) Error() string {
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " failed: " + e.Message
}
