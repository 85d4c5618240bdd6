package admission

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
)

// The execution states the tables run against, each built by folding a real
// event sequence with fold.Fold, and the resume kinds they are asked.

// wakeAt is the instant every timed park of the tables recorded.
const wakeAt int64 = 1_000_000

const approveSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},"by":{"type":"string","default":"unknown"}},"required":["approved"],"additionalProperties":false}`

// logBuilder writes test logs tersely: sequences and timestamps are
// assigned in order, payloads are JSON text.
type logBuilder struct{ evs []event.Envelope }

func newLog() *logBuilder { return &logBuilder{} }

func (l *logBuilder) envelope(typ, payload string, kernel bool) *logBuilder {
	seq := int64(len(l.evs))
	e := event.Envelope{ID: "ev-" + strconv.FormatInt(seq, 10), WorkflowID: "wf", ExecutionID: "ex-1",
		Type: typ, Sequence: seq, Timestamp: 1000 + seq}
	if payload != "" {
		e.Payload = json.RawMessage(payload)
	}
	if kernel {
		e.Metadata = map[string]json.RawMessage{"kernel": json.RawMessage("true")}
	}
	l.evs = append(l.evs, e)
	return l
}

func (l *logBuilder) add(typ, payload string) *logBuilder    { return l.envelope(typ, payload, false) }
func (l *logBuilder) kernel(typ, payload string) *logBuilder { return l.envelope(typ, payload, true) }
func (l *logBuilder) started() *logBuilder {
	return l.add(event.ExecutionStarted, `{"input":{"n":1}}`)
}
func (l *logBuilder) suspend(payload string) *logBuilder {
	return l.add(event.ExecutionSuspended, payload)
}
func (l *logBuilder) fold() fold.State { return fold.Fold(l.evs) }

var (
	ts           = strconv.FormatInt(wakeAt, 10)
	selectParked = `{"on":"__loom_select__","waits":[{"waitId":"sel/0","kind":"gate","on":"approve"},` +
		`{"waitId":"sel/1","kind":"timer","wakeAt":` + ts + `},{"waitId":"sel/2","kind":"message","topic":"m"}]}`
)

// tableState is one row of the tables: a folded state, the flow's resume
// schemas, and the status the fold must have reached (a check on the log).
type tableState struct {
	name    string
	log     *logBuilder
	schemas bool // the flow declares approveSchema for "approve"
	status  fold.Status
}

func tableStates() []tableState {
	return []tableState{
		{name: "pending", log: newLog(), status: fold.StatusPending},
		{name: "running", log: newLog().started().add(event.StepStarted, `{"stepId":"a"}`), status: fold.StatusRunning},
		{name: "gate", log: newLog().started().suspend(`{"on":"approve"}`), status: fold.StatusSuspended},
		{name: "gate+schema", log: newLog().started().suspend(`{"on":"approve"}`), schemas: true, status: fold.StatusSuspended},
		{name: "gate+wakeAt", log: newLog().started().suspend(`{"on":"approve","timeoutMs":60000,"wakeAt":` + ts + `}`), status: fold.StatusSuspended},
		{name: "gate+failedWhileParked", log: newLog().started().add(event.StepStarted, `{"stepId":"side"}`).
			suspend(`{"on":"approve"}`).add(event.StepFailed, `{"stepId":"side","error":{"message":"boom"}}`), status: fold.StatusSuspended},
		{name: "select", log: newLog().started().suspend(selectParked), status: fold.StatusSuspended},
		{name: "select+answered", log: newLog().started().suspend(selectParked).
			kernel(event.MessageConsumed, `{"topic":"m","messageId":"m-1","waitId":"sel/2","payload":{"n":1}}`), status: fold.StatusSuspended},
		{name: "indoubt", log: newLog().started().add(event.StepStarted, `{"stepId":"pay","attempt":1}`).
			add(event.EffectInDoubt, `{"stepId":"pay","attempt":1}`).
			suspend(`{"on":"__loom_indoubt__","stepId":"pay","attempt":1}`), status: fold.StatusSuspended},
		{name: "indoubt-nofact", log: newLog().started().add(event.StepStarted, `{"stepId":"pay","attempt":1}`).
			suspend(`{"on":"__loom_indoubt__","stepId":"pay","attempt":1}`), status: fold.StatusSuspended},
		{name: "diverged", log: newLog().started().add(event.StepStarted, `{"stepId":"a"}`).add(event.StepCompleted, `{"stepId":"a","output":1}`).
			suspend(`{"on":"__loom_diverged__","reason":"step \"b\" issued where the log has \"c\""}`), status: fold.StatusSuspended},
		{name: "sleep", log: newLog().started().suspend(`{"on":"__loom_sleep__","wakeAt":` + ts + `}`), status: fold.StatusSuspended},
		{name: "completed", log: newLog().started().add(event.ExecutionCompleted, `{"output":1}`), status: fold.StatusCompleted},
		{name: "failed", log: newLog().started().add(event.ExecutionFailed, `{"error":{"message":"boom"}}`), status: fold.StatusFailed},
		{name: "cancelled", log: newLog().started().add(event.ExecutionCancelled, `{"reason":"operator"}`), status: fold.StatusCancelled},
		{name: "continued", log: newLog().started().kernel(event.ExecutionContinued, `{"nextExecutionId":"ex-2"}`), status: fold.StatusContinued},
	}
}

func mustSchemas(t testing.TB, declare bool) map[string]*schema.Schema {
	t.Helper()
	if !declare {
		return nil
	}
	s, err := schema.Compile(approveSchema)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*schema.Schema{"approve": s}
}

// resumeKind is one column: a resume of one kind, through the function the
// runtime calls for it.
type resumeKind struct {
	name string
	run  func(st fold.State, schemas map[string]*schema.Schema) (Admission, error)
}

func resume(typ, payload string, nowMs int64) func(fold.State, map[string]*schema.Schema) (Admission, error) {
	return func(st fold.State, schemas map[string]*schema.Schema) (Admission, error) {
		return Admit(st, schemas, Event{Type: typ, Payload: raw(payload)}, nowMs)
	}
}

func resumeAs(typ, payload string) func(fold.State, map[string]*schema.Schema) (Admission, error) {
	return func(st fold.State, schemas map[string]*schema.Schema) (Admission, error) {
		return AdmitResumeAs(st, schemas, Event{Type: typ, Payload: raw(payload)}, wakeAt)
	}
}

func verdict(stepID string, attempt int64) func(fold.State, map[string]*schema.Schema) (Admission, error) {
	return func(st fold.State, _ map[string]*schema.Schema) (Admission, error) {
		return AdmitVerdict(st, Verdict{StepID: stepID, Attempt: attempt, Done: true, Output: raw(`"ch_1"`)})
	}
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func timerAt(at int64) string { return `{"wakeAt":` + strconv.FormatInt(at, 10) + `}` }

func resumeKinds() []resumeKind {
	return []resumeKind{
		{"approve", resume("approve", `{"approved":true}`, wakeAt)},
		{"reject", resume("reject", `{"approved":true}`, wakeAt)},
		{"STEP_COMPLETED", resume(event.StepCompleted, `{"stepId":"pay","output":"forged"}`, wakeAt)},
		{"EXECUTION_MIGRATED", resume(event.ExecutionMigrated, `{"migratedInput":{"n":2}}`, wakeAt)},
		{"APPROVAL_GRANTED", resume(event.ApprovalGranted, `{"principal":"root","gate":"approve"}`, wakeAt)},
		{"__loom_fork__", resume("__loom_fork__", `{}`, wakeAt)},
		{"__loom_indoubt__", resume(fold.GateInDoubt, ``, wakeAt)},
		{"__loom_diverged__", resume(fold.GateDiverged, ``, wakeAt)},
		{"__loom_diverged__+value", resume(fold.GateDiverged, `{"approved":true}`, wakeAt)},
		{"__loom_sleep__", resume(GateSleep, ``, wakeAt)},
		{"timer-due", resume(event.TimerFired, timerAt(wakeAt), wakeAt)},
		{"timer-not-due", resume(event.TimerFired, timerAt(wakeAt), wakeAt-1)},
		{"timer-wrong-wakeAt", resume(event.TimerFired, timerAt(wakeAt+5), wakeAt+10)},
		{"timer-malformed", resume(event.TimerFired, `{"wakeAt":"soon"}`, wakeAt)},
		{"EXECUTION_RECOVERED", resume(event.ExecutionRecovered, ``, wakeAt)},
		{"verdict", verdict("pay", 1)},
		{"verdict-wrong-step", verdict("charge", 1)},
		{"verdict-wrong-attempt", verdict("pay", 2)},
		{"null", resume("approve", `null`, wakeAt)},
		{"schema-invalid", resume("approve", `{"approved":"yes"}`, wakeAt)},
		{"not-json", resume("approve", `{"approved":`, wakeAt)},
		{"resumeAs", resumeAs("approve", `{"approved":true}`)},
		{"resumeAs-untyped", resumeAs("", ``)},
		{"resumeAs-kernel", resumeAs(event.StepCompleted, `{"stepId":"pay"}`)},
		{"resumeAs-reserved", resumeAs("__loom_fork__", `{}`)},
	}
}
