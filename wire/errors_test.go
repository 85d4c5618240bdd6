package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// TestErrorCodeTable pins the mapping of every typed error to its code.
func TestErrorCodeTable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&loom.ResumeRefusedError{Reason: loom.RefusedKernelEventType}, -32011},
		{&loom.ResumeRefusedError{Reason: loom.RefusedNotSuspended}, -32012},
		{&loom.ResumeRefusedError{Reason: loom.RefusedGateMismatch}, -32013},
		{&loom.ResumeRefusedError{Reason: loom.RefusedNotRecoverable}, -32014},
		{&loom.ResumeRefusedError{Reason: loom.RefusedNullAfterFailure}, -32015},
		{&loom.ResumeRefusedError{Reason: loom.RefusedTimerNotDue}, -32016},
		{&loom.ResumeRefusedError{Reason: loom.RefusedTerminal}, -32017},
		{&loom.ResumeRefusedError{Reason: loom.RefusedUnauthenticated}, -32018},
		{&loom.ResumeRefusedError{Reason: loom.RefusedBusy}, -32019},
		{&loom.ResumeRefusedError{Reason: "some-future-reason"}, -32010},
		{&loom.ResumePayloadValidationError{Gate: "g"}, -32020},
		{&loom.ExecutionBusyError{ExecutionID: "x", Owner: "node-1", ExpiresAt: time.UnixMilli(1)}, -32019},
		{&loom.FlowCodeMismatchError{ExecutionID: "x", FlowID: "f", Recorded: "a", Registered: "b"}, -32034},
		{&loom.NotConfiguredError{Field: "Timers", Need: "a timed wait"}, -32071},
		{&loom.InputTypeError{FlowID: "f", Want: "int", Got: "a string"}, -32040},
		{&loom.ExecutionDeniedError{Action: "start"}, -32002},
		{wrap(loom.ErrExecutionNotFound), -32030},
		{wrap(loom.ErrExecutionExists), -32031},
		{wrap(loom.ErrUnknownFlow), -32032},
		{&rangeError{}, -32033},
		{&event.InvalidEnvelopeError{Field: "id", Reason: "empty"}, -32040},
		{&event.PayloadTooLargeError{Field: "payload", Size: 2, Limit: 1}, -32041},
		{wrap(context.DeadlineExceeded), -32050},
		{context.Canceled, -32051},
		{loom.ErrRuntimeClosed, -32060},
		{store.ErrClosed, -32060},
		{&loom.JournalError{Err: errors.New("disk")}, -32061},
		{&store.SequenceConflictError{}, -32062},
		{errors.New("something else"), -32603},
	} {
		e, _ := errorFor(tc.err)
		if e.Code != tc.code {
			t.Errorf("%T %v: code %d, want %d", tc.err, tc.err, e.Code, tc.code)
		}
		if standard := []int{-32700, -32600, -32601, -32602, -32603}; !(e.Code >= -32099 && e.Code <= -32000) && !slices.Contains(standard, e.Code) {
			t.Errorf("%v: code %d outside the reserved ranges", tc.err, e.Code)
		}
	}
}

// TestErrorMessagesStayQuiet: the words of an authenticator, an authorizer
// or a validator never reach the caller.
func TestErrorMessagesStayQuiet(t *testing.T) {
	for _, err := range []error{
		&loom.ResumeRefusedError{ExecutionID: "x", Reason: loom.RefusedUnauthenticated, Detail: "token SECRET expired"},
		&loom.ExecutionDeniedError{ExecutionID: "x", Action: "resume", Reason: "principal SECRET lacks role"},
		&loom.ResumePayloadValidationError{ExecutionID: "x", Gate: "g", Detail: "schema: payload does not match: at /note: 'SECRET' does not match pattern '^[a-z]*$'"},
		&loom.ResumePayloadValidationError{ExecutionID: "x", Gate: "g", Violations: []loom.SchemaViolation{
			{Pointer: "/note", Keyword: "properties/note/pattern", Message: "'SECRET' does not match pattern '^[a-z]*$'"},
			{Pointer: "/n", Keyword: "properties/n/maximum", Message: "maximum: got 4242SECRET, want 10"},
			{Pointer: "/m", Keyword: "properties/m/format", Message: "'SECRET' is not valid 'email'"},
			{Pointer: "", Keyword: "additionalProperties", Message: "additional properties 'SECRET' not allowed"},
			{Pointer: "/x", Keyword: "properties/x/someFutureKeyword", Message: "SECRET"}}},
		&loom.InputTypeError{FlowID: "f", Want: "int", Got: "an input that does not decode into it (SECRET)"},
		errors.New("driver: SECRET in a query"),
	} {
		e, _ := errorFor(err)
		if strings.Contains(e.Message, "SECRET") || strings.Contains(string(e.Data), "SECRET") {
			t.Errorf("%T leaks: %s %s", err, e.Message, e.Data)
		}
	}
	e, _ := errorFor(&loom.ResumePayloadValidationError{Gate: "g", Detail: "schema: payload does not match: at /note: 'x' no",
		Violations: []loom.SchemaViolation{{Pointer: "/note", Keyword: "pattern", Message: "'x' does not match pattern '^[a-z]*$'"}}})
	if !strings.Contains(string(e.Data), `"location":"/note"`) {
		t.Fatalf("location lost: %s", e.Data)
	}
}

// TestVersionPinsProtocol fails when the methods or the error codes change
// without a new Version (and this pin) — the wire ABI's K1-style pin.
func TestVersionPinsProtocol(t *testing.T) {
	const pinned = "1.6.0"
	methods := []string{"loom.handshake", "execution.start", "execution.resume", "execution.cancel",
		"execution.fork", "execution.state", "execution.events", "execution.subscribe", "execution.resolve", "execution.gate",
		"execution.watch", "readmodel.query", "readmodel.watch", "execution.send", "execution.resumeAs", "runtime.recover", "execution.list",
		"execution.checkReplay"}
	codes := []int{CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams, CodeInternal,
		CodeUnauthenticated, CodeDenied, CodeRequestTooLarge, CodeResumeRefused, CodeKernelEventType,
		CodeNotSuspended, CodeGateMismatch, CodeNotRecoverable, CodeNullAfterFailure, CodeTimerNotAllowed,
		CodeTerminal, CodeResumeUnauthorized, CodeBusy, CodePayloadInvalid, CodeExecutionNotFound,
		CodeExecutionExists, CodeUnknownFlow, CodeSequenceOutOfRange, CodeFlowCodeMismatch, CodeInvalidInput, CodePayloadTooLarge,
		CodeDeadlineExceeded, CodeCancelled, CodeUnavailable, CodeStoreFailed, CodeConflict, CodeSubscribeUnsupported,
		CodeNotConfigured, CodeSendRefused}
	want := []int{-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32010, -32011, -32012, -32013,
		-32014, -32015, -32016, -32017, -32018, -32019, -32020, -32030, -32031, -32032, -32033, -32034, -32040, -32041,
		-32050, -32051, -32060, -32061, -32062, -32070, -32071, -32021}
	if Version != pinned || !slices.Equal(Methods(), methods) || !slices.Equal(codes, want) {
		t.Fatalf("the wire protocol changed: Version %s, methods %v, codes %v; bump Version (MINOR for additions, MAJOR otherwise) and update this pin and doc.go", Version, Methods(), codes)
	}
	for reason := range refusalCodes { //loom:order-independent membership check
		if refusalCodes[reason] == CodeResumeRefused {
			t.Fatalf("reason %s has the catch-all code", reason)
		}
	}
}

// TestExecutionExistsWinsOverStoreErrors: a duplicate start (or fork) maps
// to CodeExecutionExists however its chain is wrapped — inside the
// *loom.JournalError of the refused append, beside a fencing or sequence
// conflict error, in a join — and never to CodeStoreFailed or
// CodeConflict. A conflict on an append that expected an empty log is a
// duplicate too: the log was there first.
func TestExecutionExistsWinsOverStoreErrors(t *testing.T) {
	exists := fmt.Errorf("%w: %q", loom.ErrExecutionExists, "o-1")
	firstAppend := &store.SequenceConflictError{ExecutionID: "o-1", Expected: 0, Actual: 4}
	fenced := &store.FencedError{ExecutionID: "o-1", Token: 1, Current: 2}
	journal := func(err error) error { return &loom.JournalError{ExecutionID: "o-1", Sequence: 0, Err: err} }
	for name, tc := range map[string]struct {
		err  error
		code int
	}{
		"journal wraps exists":          {journal(exists), CodeExecutionExists},
		"exists wraps journal":          {fmt.Errorf("%w: %w", loom.ErrExecutionExists, journal(errors.New("disk"))), CodeExecutionExists},
		"journal beside exists":         {errors.Join(journal(errors.New("disk")), exists), CodeExecutionExists},
		"conflict beside exists":        {errors.Join(&store.SequenceConflictError{Expected: 3, Actual: 5}, exists), CodeExecutionExists},
		"fenced beside exists":          {journal(errors.Join(fenced, exists)), CodeExecutionExists},
		"journal of a first append":     {journal(firstAppend), CodeExecutionExists},
		"wrapped journal, first append": {fmt.Errorf("start: %w", journal(fmt.Errorf("append: %w", firstAppend))), CodeExecutionExists},
		"first append beside fenced":    {journal(errors.Join(fenced, firstAppend)), CodeExecutionExists},
		"barrier wraps journal, exists": {fmt.Errorf("barrier: %w", journal(exists)), CodeExecutionExists},
		"deadline beside exists":        {errors.Join(context.DeadlineExceeded, journal(exists)), CodeExecutionExists},
		"closed beside exists":          {errors.Join(store.ErrClosed, exists), CodeExecutionExists},
		// Still what they were without a duplicate in the chain.
		"journal of a later append": {journal(&store.SequenceConflictError{Expected: 7, Actual: 8}), CodeStoreFailed},
		"journal, disk":             {journal(errors.New("disk")), CodeStoreFailed},
		"later conflict":            {&store.SequenceConflictError{Expected: 7, Actual: 8}, CodeConflict},
		"conflict on an empty log":  {&store.SequenceConflictError{Expected: 0, Actual: 0}, CodeConflict},
		"denied, exists":            {errors.Join(&loom.ExecutionDeniedError{Action: "start"}, exists), CodeDenied},
	} { //loom:order-independent each case is checked on its own
		e, _ := errorFor(tc.err)
		if e.Code != tc.code {
			t.Errorf("%s (%v): code %d, want %d", name, tc.err, e.Code, tc.code)
		}
		if tc.code == CodeExecutionExists && !errors.Is(e, loom.ErrExecutionExists) {
			t.Errorf("%s: the client-side error does not match loom.ErrExecutionExists", name)
		}
	}
}
