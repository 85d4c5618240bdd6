package fold

import (
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
)

func TestSchema1_23_WaveTwoKindsFoldOnlyFromKernelStampedEnvelopes(t *testing.T) {
	cases := map[string]string{
		event.MessageConsumed:    `{"topic":"t","messageId":"m1"}`,
		event.ExecutionContinued: `{"nextExecutionId":"ex-2"}`,
		event.InboxQuarantined:   `{"topic":"t","messageId":"m1"}`,
		event.ParallelCompleted:  `{"scopeId":"p","status":"completed","branches":2}`,
		event.ExecutionResumed:   `{"eventType":"approve","payload":1,"waitId":"w1"}`,
	}
	for typ, payload := range cases {
		t.Run(typ, func(t *testing.T) {
			base := newLog().started().add(event.ExecutionSuspended, `{"on":"approve"}`)
			plain := Fold(append(append([]event.Envelope(nil), base.evs...), newLogAt(base, typ, payload, false)))
			stamped := Fold(append(append([]event.Envelope(nil), base.evs...), newLogAt(base, typ, payload, true)))
			if mustEncode(t, plain) == mustEncode(t, stamped) {
				t.Fatalf("stamped and unstamped %s fold alike", typ)
			}
			if typ == event.ExecutionResumed {
				// Unstamped, the waitId is ignored: an ordinary passthrough.
				if len(plain.Variables.ResumePayloads) != 1 || len(plain.Variables.WaitAnswers) != 0 {
					t.Fatalf("unstamped wait-addressed resume: %+v", plain.Variables)
				}
				if len(stamped.Variables.ResumePayloads) != 0 || stamped.Variables.WaitAnswers["w1"].Seq != 2 {
					t.Fatalf("stamped wait-addressed resume: %+v", stamped.Variables)
				}
				return
			}
			sameBesidesClock(t, plain, base.fold())
		})
	}
}

// newLogAt builds the next envelope after base, stamped or not.
func newLogAt(base *logBuilder, typ, payload string, kernel bool) event.Envelope {
	l := &logBuilder{evs: append([]event.Envelope(nil), base.evs...)}
	if kernel {
		l.kernel(typ, payload)
	} else {
		l.add(typ, payload)
	}
	return l.evs[len(l.evs)-1]
}

func TestSchema1_23_ContinuedIsTerminalAndChained(t *testing.T) {
	s := newLog().started().kernel(event.ExecutionContinued, `{"nextExecutionId":"ex-2"}`).fold()
	wantStatus(t, s, StatusContinued)
	if !s.Status.Terminal() || s.Variables.ContinuedTo != "ex-2" {
		t.Fatalf("state = %+v", s.Variables)
	}
}

func TestSchema1_23_StartCarrySeedsResourcesAndInbox(t *testing.T) {
	s := newLog().add(event.ExecutionStarted,
		`{"input":1,"carry":{"resources":{"tokens":7},"inbox":{"t":{"consumed":3,"lastMessageId":"m3","seq":9}}}}`).fold()
	if r := s.Variables.Resources; r == nil || *r.Tokens != 7 {
		t.Fatalf("_resources = %+v", r)
	}
	if c := s.Variables.Inbox["t"]; c.Consumed != 3 || c.LastMessageID != "m3" {
		t.Fatalf("_inbox = %+v", s.Variables.Inbox)
	}
	bad := newLog().add(event.ExecutionStarted, `{"input":1,"carry":{"resources":{"tokens":-1},"inbox":{"t":{"consumed":3}}}}`).fold()
	if bad.Variables.Resources != nil || bad.Variables.Inbox != nil {
		t.Fatal("an invalid carry was folded")
	}
}

func TestSchema1_25_QuarantineQueueIsReleasedHeldStar(t *testing.T) {
	l := newLog().started().
		kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m1"}`).
		kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m2"}`).
		kernel(event.InboxReleased, `{"topic":"t","messageId":"m2","operator":"op"}`) // not the head: ignored
	s := l.fold()
	if q := s.Variables.Quarantined["t"]; len(q) != 2 || q[0].Released || q[1].Released {
		t.Fatalf("release out of order was applied: %+v", q)
	}
	invalid := []string{
		`{"topic":"t","messageId":"m1"}`,                             // neither operator nor auto
		`{"topic":"t","messageId":"m1","operator":"op","auto":true}`, // both
		`{"topic":"t","messageId":"m1","auto":true}`,                 // auto without deliver
	}
	for _, p := range invalid {
		if q := Apply(s, newLogAt(l, event.InboxReleased, p, true)).Variables.Quarantined["t"]; q[0].Released {
			t.Errorf("invalid release %s applied", p)
		}
	}
	l.kernel(event.InboxReleased, `{"topic":"t","messageId":"m1","auto":true,"deliver":true}`)
	if q := l.fold().Variables.Quarantined["t"]; !q[0].Released || q[1].Released {
		t.Fatalf("head not released: %+v", q)
	}
	l.kernel(event.MessageConsumed, `{"topic":"t","messageId":"m1"}`)
	s = l.fold()
	if q := s.Variables.Quarantined["t"]; len(q) != 1 || q[0].MessageID != "m2" {
		t.Fatalf("delivered released head not dropped: %+v", q)
	}
	if c := s.Variables.Inbox["t"]; c.Consumed != 1 || c.LastMessageID != "m1" {
		t.Fatalf("_inbox = %+v", c)
	}
}

func TestSchema1_25_QuarantineIsBounded(t *testing.T) {
	l := newLog().started()
	for i := 0; i < MaxQuarantinedPerTopic+5; i++ {
		l.kernel(event.InboxQuarantined, `{"topic":"t","messageId":"m`+itoa(int64(i))+`"}`)
	}
	if n := len(l.fold().Variables.Quarantined["t"]); n != MaxQuarantinedPerTopic {
		t.Fatalf("queue holds %d entries", n)
	}
}

func TestK9_InDoubtFactKeyedByStepAndAttempt(t *testing.T) {
	s := newLog().started().
		add(event.StepStarted, `{"stepId":"pay","attempt":1}`).
		add(event.EffectInDoubt, `{"stepId":"pay","attempt":1}`).
		add(event.ExecutionSuspended, `{"on":"__loom_indoubt__","stepId":"pay","attempt":1}`).fold()
	if s.Frames["pay"].Status != FrameInDoubt || s.Variables.InDoubt[InDoubtKey("pay", 1)].Seq != 2 {
		t.Fatalf("state = %+v %+v", s.Frames["pay"], s.Variables.InDoubt)
	}
	if s.Variables.SuspendedOn.On != GateInDoubt || s.Variables.SuspendedOn.StepID != "pay" {
		t.Fatalf("_suspendedOn = %+v", s.Variables.SuspendedOn)
	}
}

func TestSchema1_15_MigrationReplacesInputAndPins(t *testing.T) {
	s := newLog().started().
		add(event.ExecutionMigrated, `{"toFlowHash":"sha256:new","toCodeHash":"c2","migratedInput":{"n":2}}`).fold()
	v := s.Variables
	if v.FlowHash != "sha256:new" || v.CodeHash != "c2" || string(v.Input) != `{"n":2}` {
		t.Fatalf("variables = %+v", v)
	}
}

func TestSchema1_23_ForkMetadataFoldsOnlyFromKernelStamps(t *testing.T) {
	meta := func(kernel bool) map[string]json.RawMessage {
		m := map[string]json.RawMessage{"forkChain": json.RawMessage(`[{"executionId":"p","sequence":3}]`),
			"forkedBy": json.RawMessage(`"ops"`)}
		if kernel {
			m["kernel"] = json.RawMessage("true")
		}
		return m
	}
	plain := newLog().started().envelope(event.ExecutionResumed, `null`, meta(false)).fold()
	if plain.Variables.ForkChain != nil || plain.Variables.ForkedBy != nil {
		t.Fatal("unstamped fork metadata folded")
	}
	s := newLog().started().envelope(event.ExecutionResumed, `null`, meta(true)).fold()
	if string(s.Variables.ForkChain) != `[{"executionId":"p","sequence":3}]` || string(s.Variables.ForkedBy) != `"ops"` {
		t.Fatalf("fork metadata = %s %s", s.Variables.ForkChain, s.Variables.ForkedBy)
	}
}

func TestSchema1_23_AWaitIsAnsweredOnce(t *testing.T) {
	s := newLog().started().
		add(event.ExecutionSuspended, `{"on":"__loom_select__","waits":[{"waitId":"w","kind":"message","topic":"t"}]}`).
		kernel(event.MessageConsumed, `{"topic":"t","messageId":"m1","waitId":"w","payload":{"n":1}}`).
		kernel(event.ExecutionResumed, `{"eventType":"__loom_message__","waitId":"w"}`).fold()
	if a := s.Variables.WaitAnswers["w"]; string(a.Payload) != `{"n":1}` || a.MessageID != "m1" {
		t.Fatalf("answer %+v", a)
	}
	if len(s.Variables.ResumePayloads) != 0 || s.Status != StatusRunning {
		t.Fatalf("state %+v", s.Variables.ResumePayloads)
	}
}
