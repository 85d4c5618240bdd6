package fold

import (
	"testing"

	"github.com/loom-kernel/loom/event"
)

// Each test names the spec §4 rule it pins.

func TestHandlersCoverKnownTypesExactly(t *testing.T) {
	for _, typ := range event.KnownTypes() {
		if !HasHandler(typ) {
			t.Errorf("no fold handler for known type %s", typ)
		}
	}
	if len(handlers) != len(event.KnownTypes()) {
		t.Errorf("%d handlers for %d known types", len(handlers), len(event.KnownTypes()))
	}
}

// samplePayloads is a plausible payload for every known type.
var samplePayloads = map[string]string{
	event.ExecutionRecovered: `{"reason":"crash"}`,
	event.ExecutionMigrated:  `{"toFlowHash":"sha256:cd"}`,
	event.ExecutionDenied:    `{"reason":"no"}`,
	event.StepStarted:        `{"stepId":"s","input":1}`,
	event.StepCompleted:      `{"stepId":"s","output":2}`,
	event.StepFailed:         `{"stepId":"s","error":{"message":"boom"}}`,
	event.StepRetrying:       `{"stepId":"s","attempt":2}`,
	event.StepCancelled:      `{"stepId":"s"}`,
	event.DecisionRecorded:   `{"decisionId":"d","choice":"a"}`,
	event.TimerFired:         `{"wakeAt":5}`,
	event.EffectInDoubt:      `{"stepId":"s","attempt":1}`,
	event.EffectDenied:       `{"stepId":"s","reason":"grant"}`,
	event.ResourceMetered:    `{"tokens":3}`,
	event.QuotaExceeded:      `{"dimension":"tokens","reason":"cap"}`,
	event.SafetyBlocked:      `{"stepId":"s","reason":"pii"}`,
	event.EgressDenied:       `{"reason":"host"}`,
	event.OutcomeRecorded:    `{"outcome":{"ok":true}}`,
	event.ApprovalGranted:    `{"principal":"ann","gate":"approve"}`,
	event.PayloadShredded:    `{"subject":"u1"}`,
	event.MessageConsumed:    `{"topic":"t","messageId":"m"}`,
	event.ParallelCompleted:  `{"scopeId":"p","status":"completed","branches":2}`,
	event.EventsRehomed:      `{"fromExecutionId":"","count":2}`,
	event.InboxQuarantined:   `{"topic":"t","messageId":"m"}`,
	event.InboxReleased:      `{"topic":"t","messageId":"m","operator":"op"}`,
}

func TestSpec4_StatusMovedOnlyByExecutionLevelEvents(t *testing.T) {
	for typ, payload := range samplePayloads {
		if event.IsStatusEvent(typ) {
			t.Fatalf("%s is in the sample of non-status events", typ)
		}
		for _, park := range []bool{false, true} {
			l := newLog().started()
			want := StatusRunning
			if park {
				l.add(event.ExecutionSuspended, `{"on":"approve"}`)
				want = StatusSuspended
			}
			l.kernel(typ, payload)
			if got := l.fold().Status; got != want {
				t.Errorf("%s (parked=%v) moved status to %q", typ, park, got)
			}
		}
	}
}

func TestSpec4_StepFailedNeverFailsTheExecution(t *testing.T) {
	s := newLog().started().
		add(event.StepStarted, `{"stepId":"charge"}`).
		add(event.StepFailed, `{"stepId":"charge","error":{"message":"declined"}}`).fold()
	wantStatus(t, s, StatusRunning)
	if fr := s.Frames["charge"]; fr.Status != FrameFailed || string(fr.Error) != `{"message":"declined"}` {
		t.Fatalf("frame = %+v", fr)
	}
	if s.Variables.Error != nil {
		t.Fatalf("_error set by a step failure: %s", s.Variables.Error)
	}
}

func TestSpec4_OnlyExecutionFailedFailsTheExecution(t *testing.T) {
	s := newLog().started().add(event.ExecutionFailed, `{"error":{"message":"x"}}`).fold()
	wantStatus(t, s, StatusFailed)
	if string(s.Variables.Error) != `{"message":"x"}` {
		t.Fatalf("_error = %s", s.Variables.Error)
	}
}

func parkedWithSiblingFailure() *logBuilder {
	return newLog().started().
		add(event.StepStarted, `{"stepId":"b"}`).
		add(event.ExecutionSuspended, `{"on":"approve"}`).
		add(event.StepFailed, `{"stepId":"b","error":"sibling"}`)
}

func TestSpec4_StepFailedWhileSuspendedSetsFailedWhileParked(t *testing.T) {
	s := parkedWithSiblingFailure().fold()
	wantStatus(t, s, StatusSuspended)
	if !s.Variables.FailedWhileParked {
		t.Fatal("_failedWhileParked not set")
	}
	running := newLog().started().add(event.StepFailed, `{"stepId":"b"}`).fold()
	if running.Variables.FailedWhileParked {
		t.Fatal("_failedWhileParked set while running")
	}
}

func TestSpec4_WhateverEndsTheParkRemovesFailedWhileParked(t *testing.T) {
	enders := map[string]string{
		event.ExecutionSuspended: `{"on":"again"}`,
		event.ExecutionResumed:   `{"eventType":"approve","payload":{"ok":true}}`,
		event.ExecutionCompleted: `{"output":1}`,
		event.ExecutionFailed:    `{"error":"x"}`,
		event.ExecutionCancelled: `{}`,
	}
	for typ, payload := range enders {
		s := parkedWithSiblingFailure().add(typ, payload).fold()
		if s.Variables.FailedWhileParked {
			t.Errorf("%s left _failedWhileParked set", typ)
		}
	}
}

func TestSpec4_NullResumeAfterParkedFailureIsStatusOnly(t *testing.T) {
	for _, payload := range []string{``, `null`, `{"eventType":"approve","payload":null}`, `{"eventType":"approve"}`} {
		s := parkedWithSiblingFailure().add(event.ExecutionResumed, payload).fold()
		wantStatus(t, s, StatusRunning)
		if len(s.Variables.ResumePayloads) != 0 {
			t.Errorf("payload %q: null resume added a passthrough", payload)
		}
	}
	// A non-null answer in the same position is a passthrough.
	s := parkedWithSiblingFailure().add(event.ExecutionResumed, `{"eventType":"approve","payload":true}`).fold()
	if len(s.Variables.ResumePayloads) != 1 {
		t.Fatal("a non-null answer after a parked failure was not recorded")
	}
}

func TestSchema1_20_NullResumeOfUnparkedExecutionIsStatusOnly(t *testing.T) {
	s := newLog().started().add(event.ExecutionCompleted, `{"output":1}`).
		add(event.ExecutionResumed, `null`).fold()
	wantStatus(t, s, StatusRunning)
	if len(s.Variables.ResumePayloads) != 0 {
		t.Fatal("a null resume onto a terminal execution added a passthrough")
	}
}

func TestSchema1_23_NullResumeOfReservedGatesIsStatusOnly(t *testing.T) {
	for _, gate := range []string{GateInDoubt, GateDiverged} {
		s := newLog().started().add(event.ExecutionSuspended, `{"on":"`+gate+`"}`).
			add(event.ExecutionResumed, `null`).fold()
		wantStatus(t, s, StatusRunning)
		if len(s.Variables.ResumePayloads) != 0 {
			t.Errorf("null resume of %s added a passthrough", gate)
		}
	}
}

func TestSpec5_NullAnswerToAnOrdinaryGateIsAPassthrough(t *testing.T) {
	s := newLog().started().add(event.ExecutionSuspended, `{"on":"approve"}`).
		add(event.ExecutionResumed, `{"eventType":"approve","payload":null}`).fold()
	if len(s.Variables.ResumePayloads) != 1 || string(s.Variables.ResumePayloads[0].Payload) != "null" {
		t.Fatalf("resume payloads = %+v", s.Variables.ResumePayloads)
	}
}

func TestSchema1_16_ResumePayloadsAreAnOrderedList(t *testing.T) {
	l := newLog().started()
	for i, gate := range []string{"a", "b", "c"} {
		l.add(event.ExecutionSuspended, `{"on":"`+gate+`"}`).
			add(event.ExecutionResumed, `{"eventType":"`+gate+`","payload":`+itoa(int64(i))+`}`)
	}
	s := l.fold()
	got := s.Variables.ResumePayloads
	if len(got) != 3 {
		t.Fatalf("got %d entries", len(got))
	}
	for i, gate := range []string{"a", "b", "c"} {
		if got[i].EventType != gate || string(got[i].Payload) != itoa(int64(i)) || got[i].Seq != int64(2+2*i) {
			t.Errorf("entry %d = %+v", i, got[i])
		}
	}
}

func TestSchema1_24_DecisionSeqIsTheFirstRecordsSequence(t *testing.T) {
	s := newLog().started().
		add(event.DecisionRecorded, `{"decisionId":"route","choice":"fast"}`).
		add(event.DecisionRecorded, `{"decisionId":"model","choice":"m1"}`).
		add(event.DecisionRecorded, `{"decisionId":"route","choice":"fast","context":{"x":1}}`).fold()
	route, model := s.Variables.Decisions["route"], s.Variables.Decisions["model"]
	if route.Seq == nil || *route.Seq != 1 || model.Seq == nil || *model.Seq != 2 {
		t.Fatalf("seqs: route %v model %v", route.Seq, model.Seq)
	}
	if string(route.Context) != `{"x":1}` {
		t.Fatalf("repeat did not update the entry: %+v", route)
	}
}

func TestSchema1_24_LegacyDecisionNeverGainsASeq(t *testing.T) {
	s := newLog().started().fold()
	s.Variables.Decisions = map[string]Decision{"old": {Choice: []byte(`1`)}}
	s = Apply(s, event.Envelope{Type: event.DecisionRecorded, Sequence: 1,
		Payload: []byte(`{"decisionId":"old","choice":1}`)})
	if s.Variables.Decisions["old"].Seq != nil {
		t.Fatal("a repeat invented a seq for a legacy entry")
	}
}

func TestSpec3_FlowEmitsCountedByStampForAnyType(t *testing.T) {
	s := newLog().started().
		emit("order.placed", `{"id":1}`, "d1").
		emit("order.placed", `{"id":1}`, "d1").
		emit("SOMETHING_ELSE", `{}`, "d2").
		add("order.placed", `{"id":1}`).fold()
	if got := s.Variables.FlowEmits; got["d1"] != 2 || got["d2"] != 1 || len(got) != 2 {
		t.Fatalf("_flowEmits = %v", got)
	}
}

func TestSchema1_26_SettledFramesDropInput(t *testing.T) {
	s := newLog().started().
		add(event.StepStarted, `{"stepId":"a","input":{"big":true}}`).
		add(event.StepStarted, `{"stepId":"b","input":2}`).
		add(event.StepStarted, `{"stepId":"c","input":3}`).
		add(event.StepStarted, `{"stepId":"d","input":4}`).
		add(event.StepCompleted, `{"stepId":"a","output":1}`).
		add(event.StepFailed, `{"stepId":"b","error":"x"}`).
		add(event.StepCancelled, `{"stepId":"c"}`).
		add(event.StepRetrying, `{"stepId":"d","attempt":2}`).fold()
	for _, id := range []string{"a", "b", "c"} {
		if s.Frames[id].Input != nil {
			t.Errorf("settled frame %s kept its input", id)
		}
	}
	if string(s.Frames["d"].Input) != "4" || s.Frames["d"].Attempt != 2 {
		t.Errorf("retrying frame = %+v", s.Frames["d"])
	}
}

func TestSchema1_17_TypedFailureFoldsChannelAndPayload(t *testing.T) {
	s := newLog().started().
		add(event.StepFailed, `{"stepId":"parse","error":{"message":"drift"},"channel":"schemaDrift","payload":{"field":"x"}}`).fold()
	fr := s.Frames["parse"]
	if fr.ErrorChannel != "schemaDrift" || string(fr.ErrorPayload) != `{"field":"x"}` {
		t.Fatalf("frame = %+v", fr)
	}
}

func TestSpec8_ResourcesAccumulateWithoutFalseZeros(t *testing.T) {
	s := newLog().started().
		add(event.ResourceMetered, `{"tokens":10,"costUsd":0.5}`).
		add(event.ResourceMetered, `{"tokens":5,"ms":-3,"wallMs":1e16,"custom":{"gpuSec":2}}`).fold()
	r := s.Variables.Resources
	if r == nil || *r.Tokens != 15 || *r.CostUSD != 0.5 || r.Custom["gpuSec"] != 2 {
		t.Fatalf("_resources = %+v", r)
	}
	if r.Ms != nil || r.WallMs != nil || r.MemBytes != nil || r.NetBytes != nil {
		t.Fatalf("a dimension never validly measured is present: %+v", r)
	}
}

func TestSpec4_UnknownTypesAreInert(t *testing.T) {
	base := newLog().started().add(event.StepStarted, `{"stepId":"a"}`)
	before := base.fold()
	after := base.add("order.shipped", `{"stepId":"a","status":"failed"}`).
		kernel("SOMETHING_NEW", `{"x":1}`).fold()
	sameBesidesClock(t, after, before)
	if after.Sequence != 3 {
		t.Fatalf("sequence = %d, an inert event must still advance it", after.Sequence)
	}
}

func TestSpec4_ProtoContainerKeyIsRejected(t *testing.T) {
	cases := map[string][2]string{
		"frame":    {event.StepStarted, `{"stepId":"__proto__"}`},
		"decision": {event.DecisionRecorded, `{"decisionId":"__proto__","choice":1}`},
		"inbox":    {event.MessageConsumed, `{"topic":"__proto__","messageId":"m"}`},
		"scope":    {event.ParallelCompleted, `{"scopeId":"__proto__","status":"x"}`},
		"custom":   {event.ResourceMetered, `{"custom":{"__proto__":1}}`},
		"wait":     {event.MessageConsumed, `{"topic":"t","messageId":"m","waitId":"__proto__"}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			base := newLog().started()
			before := base.fold()
			after := base.kernel(c[0], c[1]).fold()
			sameBesidesClock(t, after, before)
		})
	}
	s := newLog().started().emit("x", `{}`, ProtoKey).fold()
	if len(s.Variables.FlowEmits) != 0 {
		t.Fatal("flowEmit digest __proto__ was counted")
	}
}
