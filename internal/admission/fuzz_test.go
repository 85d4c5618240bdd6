package admission

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/schema"
)

// FuzzAdmit: on arbitrary payload bytes, event types and clocks, against
// every state of the table, the gate never panics, every refusal is a
// *Refusal with a detail, and every admission records UTF-8 JSON whose
// events a store accepts.
func FuzzAdmit(f *testing.F) {
	f.Add("approve", []byte(`{"approved":true}`), wakeAt)
	f.Add("approve", []byte(`null`), int64(0))
	f.Add("approve", []byte(`{"approved":`), int64(0))
	f.Add("approve", []byte("\"\xff\""), int64(0))
	f.Add(event.TimerFired, []byte(`{"wakeAt":1000000}`), wakeAt)
	f.Add(event.TimerFired, []byte(`{"wakeAt":-9223372036854775808}`), int64(-1))
	f.Add(event.TimerFired, []byte(`{"wakeAt":1e400}`), wakeAt)
	f.Add(event.ExecutionRecovered, []byte(nil), int64(0))
	f.Add(fold.GateDiverged, []byte(`  `), int64(0))
	f.Add(fold.GateInDoubt, []byte(`{}`), int64(0))
	f.Add(event.StepCompleted, []byte(`{"stepId":"pay"}`), int64(0))
	f.Add("", []byte(`[`), int64(0))
	type row struct {
		name    string
		st      fold.State
		schemas map[string]*schema.Schema
	}
	var rows []row
	for _, s := range tableStates() {
		rows = append(rows, row{s.name, s.log.fold(), mustSchemas(f, s.schemas)})
	}
	f.Fuzz(func(t *testing.T, typ string, payload []byte, now int64) {
		ev := Event{Type: typ, Payload: payload}
		for _, r := range rows {
			check(t, r.name+" Admit")(Admit(r.st, r.schemas, ev, now))
			check(t, r.name+" AdmitResumeAs")(AdmitResumeAs(r.st, r.schemas, ev, now))
			check(t, r.name+" AdmitVerdict")(AdmitVerdict(r.st, Verdict{StepID: typ, Attempt: now, Done: len(payload)%2 == 0, Output: payload}))
			check(t, r.name+" AdmitVerdict")(AdmitVerdict(r.st, Verdict{StepID: "pay", Attempt: 1, Done: true, Output: payload}))
		}
		_ = KernelNamespace(typ)
		_, _ = DecodeTimerFired(payload)
	})
}

// check returns the assertion for one admission function's result.
func check(t *testing.T, what string) func(Admission, error) {
	return func(a Admission, err error) { checkResult(t, what, a, err) }
}

func checkResult(t *testing.T, what string, a Admission, err error) {
	t.Helper()
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) || r.Detail == "" {
			t.Fatalf("%s: %T %v", what, err, err)
		}
		return
	}
	if a.Action == ActionAnswer && !(utf8.Valid(a.Payload) && json.Valid(a.Payload)) {
		t.Fatalf("%s: admitted a payload that is not UTF-8 JSON: %q", what, a.Payload)
	}
	evs, err := a.Events(nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, e := range evs {
		if err := event.Validate(event.Envelope{ID: "x", ExecutionID: "ex-1", Type: e.Type, Payload: e.Payload}, event.Limits{}); err != nil {
			t.Fatalf("%s: %s would be refused by the store: %v", what, e.Type, err)
		}
	}
}
