package loom

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
	"github.com/loom-kernel/loom/internal/journal"
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
	// ErrFeatureDisabled refuses a syscall or call whose kernel.features
	// flag is off.
	ErrFeatureDisabled = errors.New("loom: kernel feature disabled")
	// ErrLeaseLost is the journal failure of a drive whose lease another
	// node took: the drive stops, and its writes are refused by the fence
	// anyway.
	ErrLeaseLost = errors.New("loom: lease lost to another node")
)

// reservedPrefix starts every id, gate and event type the kernel keeps for
// itself: callers and flows may not use it.
const reservedPrefix = admission.ReservedPrefix

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
	// Violations say where and how the payload fails the gate's resume
	// schema, when that is why it was refused.
	Violations []SchemaViolation
}

// SchemaViolation is one way a payload fails a JSON Schema: Pointer is a
// JSON pointer into the payload (RFC 6901), Keyword the schema keyword that
// refused it (type, required, minimum…), Message the validator's words. It
// never holds the payload's values.
type SchemaViolation struct {
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
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

// JournalError reports that a durable append failed. The drive was aborted
// at its next barrier; the log holds everything before Sequence, and the
// execution stays as its log has it (running) for Recover.
type JournalError = journal.Error

// DriveAbortedError is what a waiter (WaitForCompletion, WaitForSuspend,
// WaitForSettled) hears when the drive of this process it was following
// stopped without an outcome: a journal failure (*JournalError, a full
// disk, a fence), a lease another node took (ErrLeaseLost), or the runtime
// closing. Nothing more was recorded; the execution stays as its log has
// it, and Recover (on any node) re-drives it.
type DriveAbortedError struct {
	ExecutionID string
	Err         error
}

func (e *DriveAbortedError) Error() string {
	return "loom: the drive of " + strconv.Quote(e.ExecutionID) + " stopped without an outcome (" + e.Err.Error() +
		"); the execution stays running in its log until Recover re-drives it"
}

// Unwrap exposes why the drive stopped.
func (e *DriveAbortedError) Unwrap() error { return e.Err }

// ExecutionBusyError refuses a re-drive (or a gate transaction) of an
// execution another node drives: its lease is live, or — before its first
// heartbeat took one — it shows activity younger than a lease TTL. Nothing
// was written: no event, no fence bump, no lease. Retry after ExpiresAt,
// when the lease lapses unless its owner renews it. It also matches
// *ResumeRefusedError with RefusedBusy under errors.As.
type ExecutionBusyError struct {
	ExecutionID string
	Owner       string // the lease owner's node id; "" before any lease was taken
	ExpiresAt   time.Time
}

func (e *ExecutionBusyError) Error() string {
	owner := "node " + strconv.Quote(e.Owner)
	if e.Owner == "" {
		owner = "a node that has not taken its lease yet (recent activity)"
	}
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " is driven by " + owner +
		"; retry after " + e.ExpiresAt.UTC().Format(time.RFC3339Nano) + ", when its lease lapses unless renewed"
}

// As lets errors.As find the ingress gate's busy refusal in it.
func (e *ExecutionBusyError) As(target any) bool {
	rr, ok := target.(**ResumeRefusedError)
	if ok {
		*rr = &ResumeRefusedError{ExecutionID: e.ExecutionID, Reason: RefusedBusy, Detail: e.Error()}
	}
	return ok
}

// FlowCodeMismatchError refuses to drive an execution whose recorded code
// pin (EXECUTION_STARTED.codeHash, or the last EXECUTION_MIGRATED's
// toCodeHash) differs from the registered flow's fingerprint (K11): the
// new code may replay the old log wrongly. Nothing was appended. Either
// declare the recorded pin compatible (WithCompatibleFingerprints) once the
// new code replays the old log, or move the execution with ResumeAs and
// OntoFlow (optionally MigrateInput), which records EXECUTION_MIGRATED.
type FlowCodeMismatchError struct {
	ExecutionID string
	FlowID      string
	Recorded    string // the execution's code pin ("" when started unpinned)
	Registered  string // the registered flow's CodeFingerprint
}

func (e *FlowCodeMismatchError) Error() string {
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " was recorded under code " + strconv.Quote(e.Recorded) +
		" but flow " + strconv.Quote(e.FlowID) + " is registered with fingerprint " + strconv.Quote(e.Registered) +
		": declare WithCompatibleFingerprints(" + strconv.Quote(e.Recorded) + ") if the new code replays the old log, " +
		"or move it with ResumeAs(OntoFlow, MigrateInput)"
}

// StepReusedError fails a step or decision whose id this run already
// issued with a different input: replay serves outcomes by id, so the
// second call would silently get the first one's outcome. Give each
// iteration its own id (Step.Iter(i), or a distinct decision id). Nothing
// was appended.
type StepReusedError struct {
	ID   string
	Kind string // "step" or "decision"
}

func (e *StepReusedError) Error() string {
	if e.Kind == "decision" {
		return "loom: decision id " + strconv.Quote(e.ID) + " was already decided in this run: use a distinct decision id per decision (e.g. append the loop index)"
	}
	return "loom: step id " + strconv.Quote(e.ID) + " was already issued in this run with another input: use step.Iter(i) (or a distinct id) for each iteration"
}

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

// SendRefusedError refuses a message: the execution ended, or does not
// exist. Nothing was appended.
type SendRefusedError struct {
	ExecutionID string
	Reason      string
}

func (e *SendRefusedError) Error() string {
	return "loom: message to " + strconv.Quote(e.ExecutionID) + " refused: " + e.Reason
}

// SimulationRefusedError fails a step with side effects and no simulation
// in simulate mode: a simulated branch never acts for real.
type SimulationRefusedError struct{ StepID string }

func (e *SimulationRefusedError) Error() string {
	return "loom: step " + strconv.Quote(e.StepID) + " has side effects and no simulation"
}

// ChainTooLongError stops a WaitForChain that followed MaxChainWaitHops
// continue-as-new links without reaching the chain's end. The Result
// returned beside it is the last continued execution reached; wait again
// from its successor.
type ChainTooLongError struct {
	ExecutionID string // the last continued execution reached
	Hops        int
}

func (e *ChainTooLongError) Error() string {
	return "loom: the chain is still continuing after " + strconv.Itoa(e.Hops) + " links (last " +
		strconv.Quote(e.ExecutionID) + "); call WaitForChain again from its successor"
}

// PanicError is a panic inside a step's effect (or the flow body), caught
// by the kernel: the step fails with it (STEP_FAILED carries the message
// and the stack), a retry policy may retry it, and the process goes on.
type PanicError struct {
	Value string // the panic value, formatted with %v
	Stack string // the panicking goroutine's stack, at most MaxPanicStackBytes
}

// MaxPanicStackBytes bounds the stack a PanicError records.
const MaxPanicStackBytes = 8 << 10

func (e *PanicError) Error() string { return "panic: " + e.Value }

func newPanicError(p any) *PanicError {
	stack := debug.Stack()
	if len(stack) > MaxPanicStackBytes {
		stack = append(stack[:MaxPanicStackBytes:MaxPanicStackBytes], "\n…(truncated)"...)
	}
	return &PanicError{Value: fmt.Sprint(p), Stack: strings.ToValidUTF8(string(stack), "?")}
}

// InputTypeError refuses a start whose input is not the flow's input type
// (NewFlow's In): nothing was appended. Pass an In, or JSON that decodes
// into one.
type InputTypeError struct {
	FlowID string
	Want   string // the flow's input type
	Got    string // what was passed
}

func (e *InputTypeError) Error() string {
	return "loom: flow " + strconv.Quote(e.FlowID) + " takes a " + e.Want + " as input, not " + e.Got
}

// FlowTypeError refuses StartFlow or Await with type parameters that are
// not the flow's own In and Out. Nothing was appended.
type FlowTypeError struct {
	FlowID    string
	Parameter string // "In" or "Out"
	Want, Got string
}

func (e *FlowTypeError) Error() string {
	return "loom: flow " + strconv.Quote(e.FlowID) + " has " + e.Parameter + " = " + e.Want + ", not " + e.Got
}

// ExecutionCancelledError is what Await returns for a cancelled execution.
type ExecutionCancelledError struct {
	ExecutionID string
	Reason      string
}

func (e *ExecutionCancelledError) Error() string {
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " was cancelled: " + e.Reason
}

// ExecutionContinuedError is what Await returns for an execution that
// continued as new: its result is its successor's (Next; WaitForChain
// follows the chain).
type ExecutionContinuedError struct {
	ExecutionID string
	Next        string
}

func (e *ExecutionContinuedError) Error() string {
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " continued as " + strconv.Quote(e.Next) +
		"; await that one (or use WaitForChain)"
}

// ConfigError is New's refusal of a Config: Field names the field to
// change, Problem says why.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "loom: Config." + e.Field + " " + e.Problem }

// ErrNotConfigured matches every *NotConfiguredError.
var ErrNotConfigured = errors.New("loom: not configured")

// NotConfiguredError refuses a syscall or a call that needs a store or a
// feature the Runtime was built without — at the call, with nothing
// appended, never a park that no one will ever wake. Field names the
// Config field to set.
type NotConfiguredError struct {
	Field string // e.g. "Timers", "Branches", "Features.Inbox"
	Need  string // what needed it, e.g. "a timed wait (Sleep)"
}

func (e *NotConfiguredError) Error() string {
	return "loom: " + e.Need + " needs Config." + e.Field + "; set it (a storage preset's Storage wires every store)"
}

// Is makes errors.Is(err, ErrNotConfigured) true, and
// errors.Is(err, ErrFeatureDisabled) for a kernel feature flag.
func (e *NotConfiguredError) Is(target error) bool {
	return target == ErrNotConfigured || target == ErrFeatureDisabled && strings.HasPrefix(e.Field, "Features.")
}
