package wire

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
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
	CodeFlowCodeMismatch     = -32034 // *loom.FlowCodeMismatchError: the recorded code pin is not the registered flow's (1.1.0)
	CodeInvalidInput         = -32040 // event.ErrInvalidEnvelope: a bad id, event type or JSON value
	CodePayloadTooLarge      = -32041 // *event.PayloadTooLargeError
	CodeDeadlineExceeded     = -32050 // context.DeadlineExceeded: the call may still have taken effect
	CodeCancelled            = -32051 // context.Canceled: the caller went away or the server is stopping
	CodeUnavailable          = -32060 // loom.ErrRuntimeClosed or store.ErrClosed
	CodeStoreFailed          = -32061 // *loom.JournalError: a durable append failed
	CodeConflict             = -32062 // store.ErrSequenceConflict: another writer moved the log; retry
	CodeSubscribeUnsupported = -32070 // the event store cannot follow a log
	CodeNotConfigured        = -32071 // *loom.NotConfiguredError: the app's runtime lacks a store or feature (1.1.0)
	CodeSendRefused          = -32021 // *loom.SendRefusedError: the execution has ended, so no message reaches it (1.4.0)
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

// ErrorData is the structured detail an error's data may hold; each field
// is present only for the codes that set it:
//
//   - executionId: most codes that concern one execution;
//   - reason: the refusal codes (a loom.RefusalReason; "in-doubt" for a
//     CodePayloadInvalid at an in-doubt park);
//   - gate, location, violations: CodePayloadInvalid;
//   - owner, expiresAt (epoch ms: retry after it): CodeBusy;
//   - flowId, recorded, registered: CodeFlowCodeMismatch;
//   - flowId, flows (the registered flow ids): CodeUnknownFlow;
//   - field, need: CodeNotConfigured; field, limit: CodePayloadTooLarge;
//     field (and flowId, want for an input): CodeInvalidInput;
//   - at, last: CodeSequenceOutOfRange; action: CodeDenied;
//     sequence: CodeStoreFailed; location: CodeInvalidParams; field,
//     reason: CodeInvalidParams for an invalid read-model query (1.3.0).
type ErrorData struct {
	ExecutionID string      `json:"executionId,omitempty"`
	Reason      string      `json:"reason,omitempty"`
	Gate        string      `json:"gate,omitempty"`
	Location    string      `json:"location,omitempty"`
	Violations  []Violation `json:"violations,omitempty"`
	Owner       string      `json:"owner,omitempty"`
	ExpiresAt   int64       `json:"expiresAt,omitempty"`
	FlowID      string      `json:"flowId,omitempty"`
	Recorded    string      `json:"recorded,omitempty"`
	Registered  string      `json:"registered,omitempty"`
	Flows       []string    `json:"flows,omitempty"`
	Field       string      `json:"field,omitempty"`
	Need        string      `json:"need,omitempty"`
	Want        string      `json:"want,omitempty"`
	Limit       int64       `json:"limit,omitempty"`
	At          *int64      `json:"at,omitempty"`
	Last        *int64      `json:"last,omitempty"`
	Action      string      `json:"action,omitempty"`
	Sequence    *int64      `json:"sequence,omitempty"`
}

// Detail decodes data into an ErrorData; fields the error does not carry
// are zero.
func (e *Error) Detail() ErrorData {
	var d ErrorData
	_ = json.Unmarshal(e.Data, &d) // data is an object written by the server; what does not decode stays zero
	return d
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
		we   *Error
		busy *loom.ExecutionBusyError
		rr   *loom.ResumeRefusedError
		pv   *loom.ResumePayloadValidationError
		dn   *loom.ExecutionDeniedError
		fm   *loom.FlowCodeMismatchError
		nc   *loom.NotConfiguredError
		it   *loom.InputTypeError
		big  *event.PayloadTooLargeError
		bad  *event.InvalidEnvelopeError
		je   *loom.JournalError
		rng  *rangeError
		irm  *store.InvalidReadModelError
		sr   *loom.SendRefusedError
	)
	switch {
	case errors.As(err, &we):
		return we, false
	case errors.As(err, &busy): // before rr: a busy error also matches it
		return busyError(busy), false
	case errors.As(err, &rr):
		return refusal(rr), false
	case errors.As(err, &pv):
		return payloadInvalid(pv), false
	case errors.As(err, &fm):
		return newError(CodeFlowCodeMismatch, "execution "+strconv.Quote(fm.ExecutionID)+" was recorded under code "+
			strconv.Quote(fm.Recorded)+" but flow "+strconv.Quote(fm.FlowID)+" is registered with fingerprint "+
			strconv.Quote(fm.Registered)+"; nothing was recorded: the app must declare the recorded code compatible "+
			"(loom.WithCompatibleFingerprints) once its new code replays the old log, or move the execution (ResumeAs)",
			map[string]any{"executionId": fm.ExecutionID, "flowId": fm.FlowID, "recorded": fm.Recorded, "registered": fm.Registered}), false
	case errors.As(err, &nc):
		return newError(CodeNotConfigured, "the app's runtime is not configured for this: "+nc.Need+" needs Config."+nc.Field+
			"; nothing was recorded", map[string]any{"field": nc.Field, "need": nc.Need}), false
	case errors.As(err, &it):
		return newError(CodeInvalidInput, "flow "+strconv.Quote(it.FlowID)+" takes a "+it.Want+
			" as input, and this input does not decode into one; nothing was started",
			map[string]any{"field": "input", "flowId": it.FlowID, "want": it.Want}), false
	case errors.As(err, &dn):
		return newError(CodeDenied, dn.Action+" of "+strconv.Quote(dn.ExecutionID)+" denied by the runtime's authorizer",
			map[string]any{"executionId": dn.ExecutionID, "action": dn.Action}), false
	case errors.As(err, &rng):
		return newError(CodeSequenceOutOfRange, "sequence "+strconv.FormatInt(rng.at, 10)+" is past the end of the log of "+
			strconv.Quote(rng.id)+" (last #"+strconv.FormatInt(rng.last, 10)+")",
			map[string]any{"executionId": rng.id, "at": rng.at, "last": rng.last}), false
	case errors.As(err, &sr):
		return newError(CodeSendRefused, "no message reaches execution "+strconv.Quote(sr.ExecutionID)+": "+sr.Reason+
			"; nothing was sent", map[string]any{"executionId": sr.ExecutionID, "reason": sr.Reason}), false
	case errors.As(err, &irm):
		return newError(CodeInvalidParams, "invalid read-model query: "+irm.Field+": "+irm.Reason+"; nothing was read",
			map[string]any{"field": irm.Field, "reason": irm.Reason}), false
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

// rangeError is a sequence past the end of a log.
type rangeError struct {
	id       string
	at, last int64
}

func (e *rangeError) Error() string {
	return "wire: sequence " + strconv.FormatInt(e.at, 10) + " is past the end of the log of " + strconv.Quote(e.id)
}

// busyError renders a refusal because another node drives the execution:
// who (its lease's owner, "" when it has not taken one yet) and when to
// retry (expiresAt, epoch ms: when the lease lapses unless renewed).
func busyError(b *loom.ExecutionBusyError) *Error {
	by := "node " + strconv.Quote(b.Owner)
	if b.Owner == "" {
		by = "a node that has not taken its lease yet (its log moved recently)"
	}
	at := b.ExpiresAt.UTC().Format(time.RFC3339Nano)
	return newError(CodeBusy, "refused (busy); nothing was recorded: execution "+strconv.Quote(b.ExecutionID)+
		" is driven by "+by+"; retry after "+at+", when its lease lapses unless its owner renews it",
		map[string]any{"executionId": b.ExecutionID, "reason": string(loom.RefusedBusy), "owner": b.Owner,
			"expiresAt": b.ExpiresAt.UnixMilli()})
}

// payloadInvalid renders a resume payload refused at its gate. For a gate
// schema it lists each violation, sorted by pointer — where (a JSON pointer
// into the payload), the schema keyword and what is wrong, never the
// payload's values (see safeViolation) — and data.location is the first
// one's pointer. At an
// in-doubt park the kernel's own words (which name the step attempt, never
// a payload) say why.
func payloadInvalid(pv *loom.ResumePayloadValidationError) *Error {
	data := map[string]any{"executionId": pv.ExecutionID, "gate": pv.Gate}
	if pv.Gate == fold.GateInDoubt {
		data["reason"] = "in-doubt"
		return newError(CodePayloadInvalid, "refused; nothing was recorded: "+pv.Detail, data)
	}
	msg := "the resume payload does not satisfy the schema of gate " + strconv.Quote(pv.Gate)
	var vs []Violation
	for _, v := range pv.Violations {
		vs = append(vs, safeViolation(v))
	}
	// The validator reports an object's properties in map order: sorted,
	// the same refusal reads the same every time.
	slices.SortFunc(vs, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
	})
	if len(vs) > 0 {
		data["location"] = vs[0].Pointer
		data["violations"] = vs
		msg += " at " + vs[0].Pointer + ": " + vs[0].Message
		if len(vs) > 1 {
			msg += " (and " + strconv.Itoa(len(vs)-1) + " more in data.violations)"
		}
	}
	return newError(CodePayloadInvalid, msg+"; nothing was recorded", data)
}

// Violation is one way a payload fails a gate's schema, as
// CodePayloadInvalid's data.violations lists it: Pointer is a JSON pointer
// into the payload, Keyword the schema keyword that refused it, Message
// what is wrong, in words that never quote the payload's values.
type Violation struct {
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

// safeViolation is a violation as the wire shows it, its message in words
// that never quote the payload (schema.SafeMessage).
func safeViolation(v loom.SchemaViolation) Violation {
	return Violation{Pointer: v.Pointer, Keyword: v.Keyword, Message: schema.SafeMessage(v.Keyword, v.Message)}
}

func invalidParams(msg string) *Error { return newError(CodeInvalidParams, msg, nil) }

func mustJSON(v any) json.RawMessage {
	b, err := marshal(v)
	if err != nil {
		panic("wire: encoding " + err.Error())
	}
	return b
}
