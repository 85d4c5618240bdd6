package admission

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// appendTo folds evs onto st as the journal would: next sequences, kernel
// stamps as Append says.
func appendTo(st fold.State, evs []Append) fold.State {
	var envs []event.Envelope
	for i, a := range evs {
		seq := st.Sequence + 1 + int64(i)
		e := event.Envelope{ID: "new-" + strconv.FormatInt(seq, 10), WorkflowID: "wf", ExecutionID: "ex-1",
			Type: a.Type, Sequence: seq, Timestamp: 5000 + seq, Payload: a.Payload}
		if a.Kernel {
			e.Metadata = map[string]json.RawMessage{"kernel": json.RawMessage("true")}
		}
		envs = append(envs, e)
	}
	return fold.FoldFrom(st, envs)
}

// TestSpec5_EveryAnswerAnswersExactlyOneSuspendPoint folds the events of
// every admitted cell of the table onto its state: a gate answer adds one
// _resumePayloads entry (or answers one wait) and wakes the execution; a
// status-only answer (a diverged park), a re-drive, a re-open and a verdict
// add none (ADR 0104). Every event is one a store accepts.
func TestSpec5_EveryAnswerAnswersExactlyOneSuspendPoint(t *testing.T) {
	for _, s := range tableStates() {
		st := s.log.fold()
		for _, k := range resumeKinds() {
			a, err := k.run(st, mustSchemas(t, s.schemas))
			if err != nil {
				continue
			}
			cell := s.name + " × " + k.name
			evs, err := a.Events(json.RawMessage(`{"sub":"alice"}`))
			if err != nil {
				t.Fatalf("%s: %v", cell, err)
			}
			for _, e := range evs {
				env := event.Envelope{ID: "x", ExecutionID: "ex-1", Type: e.Type, Payload: e.Payload}
				if err := event.Validate(env, event.Limits{}); err != nil {
					t.Fatalf("%s: %s would be refused: %v", cell, e.Type, err)
				}
			}
			next := appendTo(st, evs)
			entries := len(next.Variables.ResumePayloads) - len(st.Variables.ResumePayloads)
			answers := len(next.Variables.WaitAnswers) - len(st.Variables.WaitAnswers)
			wantEntries, wantAnswers, wantStatus := 0, 0, fold.StatusRunning
			switch {
			case a.Action == ActionAnswer && a.WaitID != "":
				wantAnswers = 1
				if got := next.Variables.WaitAnswers[a.WaitID]; string(got.Payload) != string(a.Payload) {
					t.Errorf("%s: wait answer %s, want %s", cell, got.Payload, a.Payload)
				}
			case a.Action == ActionAnswer && parkOf(st).On != fold.GateDiverged:
				wantEntries = 1
				if got := next.Variables.ResumePayloads[len(next.Variables.ResumePayloads)-1]; string(got.Payload) != string(a.Payload) || got.EventType != a.EventType {
					t.Errorf("%s: entry %+v, want %s %s", cell, got, a.EventType, a.Payload)
				}
			case a.Action == ActionRedrive:
				wantStatus = st.Status
				if next.Variables.Recoveries != st.Variables.Recoveries+1 {
					t.Errorf("%s: no recovery recorded", cell)
				}
			case a.Action == ActionVerdict:
				if _, ok := next.Variables.Decisions[VerdictDecisionID("pay", 1)]; !ok {
					t.Errorf("%s: no verdict decision", cell)
				}
			}
			if entries != wantEntries || answers != wantAnswers || next.Status != wantStatus {
				t.Errorf("%s (%s): %d entries, %d wait answers, %s; want %d, %d, %s",
					cell, a.Action, entries, answers, next.Status, wantEntries, wantAnswers, wantStatus)
			}
			if a.WakeAt != nil && next.Variables.TimersFired != st.Variables.TimersFired+1 {
				t.Errorf("%s: the timer fact is missing", cell)
			}
			if a.Action == ActionAnswer && len(next.Variables.Approvals) != len(st.Variables.Approvals)+1 {
				t.Errorf("%s: the principal was not recorded", cell)
			}
		}
	}
}

// TestAdmissionEventsBytes pins what each action appends, byte for byte:
// the same bytes the runtime's answerEvents, redrive, resumeAs and
// ResolveInDoubt write today, so wiring the package in changes no log.
func TestAdmissionEventsBytes(t *testing.T) {
	gate := newLog().started().suspend(`{"on":"approve"}`).fold()
	schemas := mustSchemas(t, true)
	at := wakeAt
	cases := []struct {
		name      string
		admit     func() (Admission, error)
		principal json.RawMessage
		want      []Append
	}{
		{"a gate answer, parsed by the schema, with a principal", func() (Admission, error) {
			return Admit(gate, schemas, Event{Type: "approve", Payload: raw(`{ "approved": true }`)}, 0)
		}, json.RawMessage(`{"sub":"alice"}`), []Append{
			{Type: event.ApprovalGranted, Payload: raw(`{"gate":"approve","principal":{"sub":"alice"}}`)},
			{Type: event.ExecutionResumed, Payload: raw(`{"eventType":"approve","payload":{"approved":true,"by":"unknown"}}`)},
		}},
		{"a gate answer without a schema keeps the caller's bytes (compacted)", func() (Admission, error) {
			return Admit(gate, nil, Event{Type: "approve", Payload: raw(`{"b":1, "a":2}`)}, 0)
		}, nil, []Append{
			{Type: event.ExecutionResumed, Payload: raw(`{"eventType":"approve","payload":{"b":1,"a":2}}`)},
		}},
		{"an absent answer is null", func() (Admission, error) {
			return Admit(gate, nil, Event{Type: "approve"}, 0)
		}, nil, []Append{
			{Type: event.ExecutionResumed, Payload: raw(`{"eventType":"approve","payload":null}`)},
		}},
		{"a select's timer wait, extra fields dropped", func() (Admission, error) {
			st := newLog().started().suspend(selectParked).fold()
			return Admit(st, nil, Event{Type: event.TimerFired, Payload: raw(`{"wakeAt":` + ts + `,"forged":true}`)}, at)
		}, nil, []Append{
			{Type: event.TimerFired, Payload: raw(`{"wakeAt":` + ts + `}`)},
			{Type: event.ExecutionResumed, Payload: raw(`{"eventType":"TIMER_FIRED","payload":{"wakeAt":` + ts + `},"waitId":"sel/1"}`), Kernel: true},
		}},
		{"a select's gate wait", func() (Admission, error) {
			st := newLog().started().suspend(selectParked).fold()
			return Admit(st, schemas, Event{Type: "approve", Payload: raw(`{"approved":false,"by":"bob"}`)}, at)
		}, nil, []Append{
			{Type: event.ExecutionResumed, Payload: raw(`{"eventType":"approve","payload":{"approved":false,"by":"bob"},"waitId":"sel/0"}`), Kernel: true},
		}},
		{"a re-drive", func() (Admission, error) {
			return Admit(newLog().started().fold(), nil, Event{Type: event.ExecutionRecovered}, 0)
		}, nil, []Append{{Type: event.ExecutionRecovered, Payload: raw(`{"reason":"re-driven after its driver stopped"}`)}}},
		{"resumeAs onto a crashed execution", func() (Admission, error) {
			return AdmitResumeAs(newLog().started().fold(), nil, Event{}, 0)
		}, json.RawMessage(`"ignored"`), []Append{{Type: event.ExecutionRecovered, Payload: raw(`{"reason":"resumeAs"}`)}}},
		{"resumeAs onto an ended execution", func() (Admission, error) {
			return AdmitResumeAs(newLog().started().add(event.ExecutionCompleted, `{"output":1}`).fold(), nil, Event{Type: "approve", Payload: raw(`{"x":1}`)}, 0)
		}, nil, []Append{{Type: event.ExecutionResumed}}},
		{"a done verdict", func() (Admission, error) {
			return AdmitVerdict(stateNamed(t, "indoubt"), Verdict{StepID: "pay", Attempt: 1, Done: true, Output: raw(`"ch_1"`)})
		}, nil, []Append{
			{Type: event.DecisionRecorded, Payload: raw(`{"choice":{"verdict":"done","output":"ch_1"},"decisionId":"__loom_verdict:pay#1"}`), Kernel: true},
			{Type: event.ExecutionResumed},
		}},
		{"a rerun verdict drops any output", func() (Admission, error) {
			return AdmitVerdict(stateNamed(t, "indoubt"), Verdict{StepID: "pay", Attempt: 1, Output: raw(`"ignored"`)})
		}, nil, []Append{
			{Type: event.DecisionRecorded, Payload: raw(`{"choice":{"verdict":"rerun"},"decisionId":"__loom_verdict:pay#1"}`), Kernel: true},
			{Type: event.ExecutionResumed},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := c.admit()
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Events(c.principal)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("events %s, want %s", show(got), show(c.want))
			}
			for i := range got {
				if got[i].Type != c.want[i].Type || string(got[i].Payload) != string(c.want[i].Payload) || got[i].Kernel != c.want[i].Kernel {
					t.Fatalf("events %s, want %s", show(got), show(c.want))
				}
			}
		})
	}
}

func TestAdmissionEventsRefuseWhatTheyCannotWrite(t *testing.T) {
	a, err := Admit(newLog().started().suspend(`{"on":"approve"}`).fold(), nil, Event{Type: "approve", Payload: raw(`1`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Events(json.RawMessage(`{not json`)); err == nil {
		t.Fatal("a principal that is not JSON was written")
	}
	if _, err := (Admission{}).Events(nil); err == nil {
		t.Fatal("the zero Admission has events")
	}
	st := stateNamed(t, "indoubt")
	if _, err := AdmitVerdict(st, Verdict{StepID: "pay", Attempt: 1, Done: true, Output: raw(`{`)}); outcome(Admission{}, err) != PI {
		t.Fatalf("a verdict whose output is not JSON: %v", err)
	}
}

// TestSpec5_RecordedValues checks what an admission records beside its
// outcome: the parsed value, the wait, the timer's instant.
func TestSpec5_RecordedValues(t *testing.T) {
	sel := stateNamed(t, "select")
	a, err := Admit(sel, nil, Event{Type: event.TimerFired, Payload: raw(timerAt(wakeAt))}, wakeAt+1)
	if err != nil || a.WaitID != "sel/1" || a.WakeAt == nil || *a.WakeAt != wakeAt || string(a.Payload) != timerAt(wakeAt) {
		t.Fatalf("timer wait: %+v %v", a, err)
	}
	sleep := stateNamed(t, "sleep")
	if a, err = Admit(sleep, nil, Event{Type: event.TimerFired, Payload: raw(timerAt(wakeAt))}, wakeAt); err != nil || a.WaitID != "" || *a.WakeAt != wakeAt {
		t.Fatalf("sleep: %+v %v", a, err)
	}
	*a.WakeAt = 7 // the admission's instant is its own, not the state's
	if *sleep.Variables.SuspendedOn.WakeAt != wakeAt {
		t.Fatal("the admission aliases the state's wakeAt")
	}
	div := stateNamed(t, "diverged")
	if a, err = Admit(div, nil, Event{Type: fold.GateDiverged, Payload: raw(` null `)}, 0); err != nil || string(a.Payload) != "null" {
		t.Fatalf("diverged: %+v %v", a, err)
	}
}

func stateNamed(t *testing.T, name string) fold.State {
	t.Helper()
	for _, s := range tableStates() {
		if s.name == name {
			return s.log.fold()
		}
	}
	t.Fatalf("no state %s", name)
	return fold.State{}
}

func show(evs []Append) string {
	b, _ := json.Marshal(evs)
	return string(b)
}

// TestParkWaits covers the helpers the runtime shares with the gate.
func TestParkWaits(t *testing.T) {
	st := stateNamed(t, "select")
	waits := ParkWaits(st)
	if len(waits) != 3 || waits[0].Kind != WaitGate || waits[0].On != "approve" || waits[1].WakeAt == nil ||
		*waits[1].WakeAt != wakeAt || waits[2].Topic != "m" {
		t.Fatalf("waits %+v", waits)
	}
	if Answered(st, "sel/2") || !Answered(stateNamed(t, "select+answered"), "sel/2") {
		t.Fatal("answered")
	}
	bad := newLog().started().suspend(`{"on":"__loom_select__","waits":[{"waitId":"a","kind":"gate","on":"approve"},{"waitId":"b","wakeAt":"x"}]}`).fold()
	if w := ParkWaits(bad); w != nil {
		t.Fatalf("a malformed waits list decoded as %+v", w)
	}
	if _, err := Admit(bad, nil, Event{Type: "approve"}, 0); outcome(Admission{}, err) != GM {
		t.Fatalf("a malformed waits list answered: %v", err)
	}
	for _, c := range []struct {
		raw string
		ok  bool
	}{{`{"wakeAt":5}`, true}, {`{"wakeAt":0}`, false}, {`{"wakeAt":-1}`, false}, {`{"wakeAt":1.5}`, false},
		{`null`, false}, {``, false}, {`[]`, false}, {`{"wakeAt":"5"}`, false}} {
		if _, ok := DecodeTimerFired(raw(c.raw)); ok != c.ok {
			t.Errorf("DecodeTimerFired(%s) = %v", c.raw, ok)
		}
	}
	for _, c := range []struct {
		raw  string
		null bool
	}{{``, true}, {`null`, true}, {" null\n", true}, {`"null"`, false}, {`0`, false}, {`{}`, false}} {
		if IsNullJSON(raw(c.raw)) != c.null {
			t.Errorf("IsNullJSON(%q)", c.raw)
		}
	}
	if VerdictDecisionID("pay", 2) != "__loom_verdict:pay#2" {
		t.Fatal(VerdictDecisionID("pay", 2))
	}
}
