package wire

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// The standard JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700 // the body is not JSON
	CodeInvalidRequest = -32600 // not a JSON-RPC 2.0 request object
	CodeMethodNotFound = -32601 // no such method in this wire ABI version
	CodeInvalidParams  = -32602 // params missing, mistyped or unknown
	CodeInternal       = -32603 // anything unmapped; the server logs the cause
)

// The wire ABI's own error codes, stable across every 1.x version: a code is
// never reused for another meaning. doc.go has the full table.
const (
	CodeUnauthenticated      = -32001 // Options.Authenticate refused the request
	CodeDenied               = -32002 // *loom.ExecutionDeniedError (the runtime's Authorizer)
	CodeRequestTooLarge      = -32003 // the request body is over Options.MaxRequestBytes
	CodeResumeRefused        = -32010 // *loom.ResumeRefusedError with a reason not listed below
	CodeKernelEventType      = -32011 // refused: kernel-event-type
	CodeNotSuspended         = -32012 // refused: not-suspended (retry once parked)
	CodeGateMismatch         = -32013 // refused: gate-mismatch
	CodeNotRecoverable       = -32014 // refused: not-recoverable
	CodeNullAfterFailure     = -32015 // refused: null-answer-after-parked-failure
	CodeTimerNotAllowed      = -32016 // refused: timer-not-allowed
	CodeTerminal             = -32017 // refused: terminal (the execution has ended)
	CodeResumeUnauthorized   = -32018 // refused: unauthenticated (the ResumeAuthenticator)
	CodeBusy                 = -32019 // refused: busy (retry)
	CodePayloadInvalid       = -32020 // *loom.ResumePayloadValidationError
	CodeExecutionNotFound    = -32030 // loom.ErrExecutionNotFound
	CodeExecutionExists      = -32031 // loom.ErrExecutionExists, however wrapped (see executionExists)
	CodeUnknownFlow          = -32032 // loom.ErrUnknownFlow
	CodeSequenceOutOfRange   = -32033 // a sequence past the end of the log
	CodeInvalidInput         = -32040 // event.ErrInvalidEnvelope: a bad id, event type or JSON value
	CodePayloadTooLarge      = -32041 // *event.PayloadTooLargeError
	CodeDeadlineExceeded     = -32050 // context.DeadlineExceeded: the call may still have taken effect
	CodeCancelled            = -32051 // context.Canceled: the caller went away or the server is stopping
	CodeUnavailable          = -32060 // loom.ErrRuntimeClosed or store.ErrClosed
	CodeStoreFailed          = -32061 // *loom.JournalError: a durable append failed
	CodeConflict             = -32062 // store.ErrSequenceConflict: another writer moved the log; retry
	CodeSubscribeUnsupported = -32070 // the event store cannot follow a log
)

// refusalCodes maps the ingress gate's reasons to their codes.
var refusalCodes = map[loom.RefusalReason]int{
	loom.RefusedKernelEventType:  CodeKernelEventType,
	loom.RefusedNotSuspended:     CodeNotSuspended,
	loom.RefusedGateMismatch:     CodeGateMismatch,
	loom.RefusedNotRecoverable:   CodeNotRecoverable,
	loom.RefusedNullAfterFailure: CodeNullAfterFailure,
	loom.RefusedTimerNotDue:      CodeTimerNotAllowed,
	loom.RefusedTerminal:         CodeTerminal,
	loom.RefusedUnauthenticated:  CodeResumeUnauthorized,
	loom.RefusedBusy:             CodeBusy,
}

// Error is a JSON-RPC 2.0 error object: what every failed call answers, and
// what the Client returns. Message says what was refused and why without
// echoing payloads or credentials; Data, when present, is a JSON object with
// structured detail (executionId, reason, gate, location…).
//
// Error matches the kernel's sentinels with errors.Is, so a client branches
// on the same values an in-process caller would: errors.Is(err,
// loom.ErrExecutionNotFound), loom.ErrExecutionExists, loom.ErrUnknownFlow,
// event.ErrInvalidEnvelope, event.ErrPayloadTooLarge,
// context.DeadlineExceeded.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return "wire: " + e.Message + " (code " + strconv.Itoa(e.Code) + ")"
}

// Is matches the kernel sentinel the code stands for.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeExecutionNotFound:
		return target == loom.ErrExecutionNotFound
	case CodeExecutionExists:
		return target == loom.ErrExecutionExists
	case CodeUnknownFlow:
		return target == loom.ErrUnknownFlow
	case CodeInvalidInput:
		return target == event.ErrInvalidEnvelope
	case CodePayloadTooLarge:
		return target == event.ErrPayloadTooLarge || target == event.ErrInvalidEnvelope
	case CodeDeadlineExceeded:
		return target == context.DeadlineExceeded
	case CodeCancelled:
		return target == context.Canceled
	}
	return false
}

// Reason returns data.reason (a loom.RefusalReason for the refusal codes),
// "" when absent.
func (e *Error) Reason() string {
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Reason
}

func newError(code int, msg string, data map[string]any) *Error {
	e := &Error{Code: code, Message: msg}
	if len(data) > 0 {
		e.Data = mustJSON(data)
	}
	return e
}

// errorFor maps an error of the runtime (or of this package) to its stable
// code and a message built from typed fields only: never err.Error() of an
// error that may carry an authenticator's or a validator's words about the
// payload. internal reports whether the error is unmapped (the server logs
// it; the caller sees only "internal error").
func errorFor(err error) (e *Error, internal bool) {
	var (
		we  *Error
		rr  *loom.ResumeRefusedError
		pv  *loom.ResumePayloadValidationError
		dn  *loom.ExecutionDeniedError
		big *event.PayloadTooLargeError
		bad *event.InvalidEnvelopeError
		je  *loom.JournalError
		rng *rangeError
	)
	switch {
	case errors.As(err, &we):
		return we, false
	case errors.As(err, &rr):
		return refusal(rr), false
	case errors.As(err, &pv):
		data := map[string]any{"executionId": pv.ExecutionID, "gate": pv.Gate}
		msg := "the resume payload does not satisfy the schema of gate " + strconv.Quote(pv.Gate)
		if loc := schemaLocation(pv.Detail); loc != "" {
			data["location"] = loc
			msg += " at " + loc
		}
		return newError(CodePayloadInvalid, msg+"; nothing was recorded", data), false
	case errors.As(err, &dn):
		return newError(CodeDenied, dn.Action+" of "+strconv.Quote(dn.ExecutionID)+" denied by the runtime's authorizer",
			map[string]any{"executionId": dn.ExecutionID, "action": dn.Action}), false
	case errors.As(err, &rng):
		return newError(CodeSequenceOutOfRange, "sequence "+strconv.FormatInt(rng.at, 10)+" is past the end of the log of "+
			strconv.Quote(rng.id)+" (last #"+strconv.FormatInt(rng.last, 10)+")",
			map[string]any{"executionId": rng.id, "at": rng.at, "last": rng.last}), false
	case errors.Is(err, loom.ErrExecutionNotFound):
		return newError(CodeExecutionNotFound, "no such execution", nil), false
	case executionExists(err):
		// Before every store, journal and context category: a duplicate
		// start's chain may also hold the *loom.JournalError of the refused
		// append, or the store's conflict or fencing error, and it is still
		// a duplicate (nothing of this call ran).
		return newError(CodeExecutionExists, "an execution with this id exists; nothing ran", nil), false
	case errors.Is(err, loom.ErrUnknownFlow):
		return newError(CodeUnknownFlow, "no flow with this id is registered", nil), false
	case errors.As(err, &big):
		return newError(CodePayloadTooLarge, big.Error(), map[string]any{"field": big.Field, "limit": big.Limit}), false
	case errors.As(err, &bad):
		// InvalidEnvelopeError never echoes the refused bytes.
		return newError(CodeInvalidInput, bad.Error(), map[string]any{"field": bad.Field}), false
	case errors.Is(err, context.DeadlineExceeded):
		return newError(CodeDeadlineExceeded, "deadline exceeded; the call may still have taken effect: read execution.state", nil), false
	case errors.Is(err, context.Canceled):
		return newError(CodeCancelled, "cancelled before completion; the call may still have taken effect", nil), false
	case errors.Is(err, loom.ErrRuntimeClosed), errors.Is(err, store.ErrClosed):
		return newError(CodeUnavailable, "the runtime is shutting down; retry against a running server", nil), false
	case errors.As(err, &je):
		return newError(CodeStoreFailed, "a durable append failed; the execution stays as its log has it",
			map[string]any{"executionId": je.ExecutionID, "sequence": je.Sequence}), false
	case errors.Is(err, store.ErrSequenceConflict):
		return newError(CodeConflict, "another writer moved the log; retry", nil), false
	}
	return newError(CodeInternal, "internal error", nil), true
}

// executionExists reports a refused duplicate: loom.ErrExecutionExists
// anywhere in err's chain, or a store sequence conflict on an append that
// expected an empty log and found one (the first append of a start or a
// fork lost to an execution already under that id), however either is
// wrapped — in a *loom.JournalError, beside a fencing error, in a join.
func executionExists(err error) bool {
	if errors.Is(err, loom.ErrExecutionExists) {
		return true
	}
	var sc *store.SequenceConflictError
	return errors.As(err, &sc) && sc.Expected == 0 && sc.Actual > 0
}

// refusal renders an ingress gate refusal. The detail the kernel writes for
// an unauthenticated resume is the authenticator's own error text, which may
// speak of the credentials: it is left out.
func refusal(rr *loom.ResumeRefusedError) *Error {
	code, ok := refusalCodes[rr.Reason]
	if !ok {
		code = CodeResumeRefused
	}
	// Cancel reports an ended execution with the same error, so the message
	// does not say "resume".
	msg := "refused (" + string(rr.Reason) + "); nothing was recorded"
	if rr.Detail != "" && rr.Reason != loom.RefusedUnauthenticated {
		msg += ": " + rr.Detail
	}
	return newError(code, msg, map[string]any{"executionId": rr.ExecutionID, "reason": string(rr.Reason)})
}

// schemaAt finds the instance location in a resume-schema refusal's detail
// ("… at /path: …"); the rest of the detail may quote the payload.
var schemaAt = regexp.MustCompile(`at (/[^\s:]*)`)

func schemaLocation(detail string) string {
	if m := schemaAt.FindStringSubmatch(detail); m != nil {
		return m[1]
	}
	return ""
}

// rangeError is a sequence past the end of a log.
type rangeError struct {
	id       string
	at, last int64
}

func (e *rangeError) Error() string {
	return "wire: sequence " + strconv.FormatInt(e.at, 10) + " is past the end of the log of " + strconv.Quote(e.id)
}

func invalidParams(msg string) *Error { return newError(CodeInvalidParams, msg, nil) }

func mustJSON(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic("wire: encoding " + err.Error())
	}
	return b
}
