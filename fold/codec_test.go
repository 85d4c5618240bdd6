package fold

import (
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

func TestEncodeIsCanonicalAndRoundTrips(t *testing.T) {
	s := newLog().started().
		add(event.StepStarted, `{"stepId":"b","input":{"z":1,"a":2}}`).
		add(event.DecisionRecorded, `{"decisionId":"d","choice":{"y":[1,2],"x":"<&>"}}`).fold()
	b := mustEncode(t, s)
	if !strings.Contains(b, `"choice":{"x":"<&>","y":[1,2]}`) {
		t.Fatalf("not canonical: %s", b)
	}
	back, err := Decode([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	if mustEncode(t, back) != b {
		t.Fatal("decode/encode changed the bytes")
	}
	if mustEncode(t, State{Sequence: -1, Status: StatusPending}) != mustEncode(t, Initial()) {
		t.Fatal("nil and empty frames encode differently")
	}
}

func TestDecodeRefusesUnknownFieldsAndProtoKeys(t *testing.T) {
	for _, in := range []string{
		`{"status":"running","frames":{},"variables":{},"sequence":0,"startedAt":0,"updatedAt":0,"extra":1}`,
		`{"status":"running","frames":{"__proto__":{"stepId":"x","status":"running","attempt":1,"seq":0}},"variables":{},"sequence":0,"startedAt":0,"updatedAt":0}`,
		`{"status":"running","frames":{},"variables":{"_decisions":{"__proto__":{"choice":1}}},"sequence":0,"startedAt":0,"updatedAt":0}`,
		`not json`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrInvalidState) {
			t.Errorf("Decode(%s) = %v, want ErrInvalidState", in, err)
		}
	}
}

func TestApplyNeverMutatesItsInput(t *testing.T) {
	l := newLog().started().
		add(event.StepStarted, `{"stepId":"a","input":1}`).
		add(event.DecisionRecorded, `{"decisionId":"d","choice":1}`).
		emit("x", `{}`, "dg").
		add(event.ExecutionSuspended, `{"on":"g"}`).
		add(event.ExecutionResumed, `{"eventType":"g","payload":1}`).
		add(event.ResourceMetered, `{"tokens":1,"custom":{"k":1}}`).
		kernel(event.MessageConsumed, `{"topic":"t","messageId":"m","waitId":"w"}`).
		kernel(event.InboxQuarantined, `{"topic":"q","messageId":"m"}`).
		add(event.EffectDenied, `{"reason":"r"}`)
	s := l.fold()
	before := mustEncode(t, s)
	for _, e := range []event.Envelope{
		newLogAt(l, event.StepCompleted, `{"stepId":"a","output":2}`, false),
		newLogAt(l, event.StepStarted, `{"stepId":"new"}`, false),
		newLogAt(l, event.DecisionRecorded, `{"decisionId":"d2","choice":2}`, false),
		newLogAt(l, event.ExecutionSuspended, `{"on":"h"}`, false),
		newLogAt(l, event.ExecutionResumed, `{"eventType":"g","payload":2}`, false),
		newLogAt(l, event.ResourceMetered, `{"tokens":1,"custom":{"k":1}}`, false),
		newLogAt(l, event.MessageConsumed, `{"topic":"t","messageId":"m2","waitId":"w2"}`, true),
		newLogAt(l, event.InboxQuarantined, `{"topic":"q","messageId":"m2"}`, true),
		newLogAt(l, event.InboxReleased, `{"topic":"q","messageId":"m","operator":"o"}`, true),
		newLogAt(l, event.EgressDenied, `{"reason":"r"}`, false),
	} {
		after := Apply(s, e)
		if mustEncode(t, s) != before {
			t.Fatalf("Apply(%s) mutated its input", e.Type)
		}
		if mustEncode(t, after) == before {
			t.Fatalf("Apply(%s) changed nothing", e.Type)
		}
	}
}

func TestFolderStateIsFrozenAgainstLaterApplies(t *testing.T) {
	l := newLog().started().add(event.StepStarted, `{"stepId":"a"}`)
	f := NewFolder(Initial())
	for _, e := range l.evs {
		f.Apply(e)
	}
	frozen := f.State()
	enc := mustEncode(t, frozen)
	for _, e := range newLog().started().add(event.StepStarted, `{"stepId":"a"}`).
		add(event.StepCompleted, `{"stepId":"a","output":1}`).
		add(event.ExecutionSuspended, `{"on":"g"}`).
		add(event.ExecutionResumed, `{"eventType":"g","payload":1}`).evs[2:] {
		f.Apply(e)
	}
	if mustEncode(t, frozen) != enc {
		t.Fatal("a later Apply changed a state the Folder had handed out")
	}
}

func TestNormalizeSnapshotPre1_21RepairsAStepFailureFoldedAsExecutionFailure(t *testing.T) {
	parked := `{"status":"failed","frames":{},"variables":{"_suspendedOn":{"on":"g","seq":3}},"sequence":4,"startedAt":1,"updatedAt":2}`
	s, err := NormalizeSnapshot("1.20.0", []byte(parked))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != StatusSuspended || !s.Variables.FailedWhileParked {
		t.Fatalf("parked repair: %s %v", s.Status, s.Variables.FailedWhileParked)
	}
	running := `{"status":"failed","frames":{},"variables":{},"sequence":4,"startedAt":1,"updatedAt":2}`
	if s, _ := NormalizeSnapshot("1.20.0", []byte(running)); s.Status != StatusRunning {
		t.Fatalf("running repair: %s", s.Status)
	}
	genuine := `{"status":"failed","frames":{},"variables":{"_error":"x"},"sequence":4,"startedAt":1,"updatedAt":2}`
	if s, _ := NormalizeSnapshot("1.20.0", []byte(genuine)); s.Status != StatusFailed {
		t.Fatalf("genuine failure repaired to %s", s.Status)
	}
	if s, _ := NormalizeSnapshot("1.21.0", []byte(running)); s.Status != StatusFailed {
		t.Fatal("a 1.21.0 snapshot was repaired")
	}
}

func TestNormalizeSnapshotPre1_26DropsSettledInputs(t *testing.T) {
	old := `{"status":"running","frames":{"a":{"stepId":"a","status":"completed","attempt":1,"input":1,"output":2,"seq":1},"b":{"stepId":"b","status":"running","attempt":1,"input":3,"seq":2}},"variables":{"_decisions":{"d":{"choice":1}}},"sequence":2,"startedAt":1,"updatedAt":2}`
	s, err := NormalizeSnapshot("1.23.0", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if s.Frames["a"].Input != nil || string(s.Frames["b"].Input) != "3" {
		t.Fatalf("frames = %+v", s.Frames)
	}
	if s.Variables.Decisions["d"].Seq != nil {
		t.Fatal("normalize invented a decision seq")
	}
}

func TestNormalizeSnapshotRefusesUnreadableVersions(t *testing.T) {
	for _, v := range []string{"1.27.0", "2.0.0", "0.9.0", "x", ""} {
		var ve *SnapshotVersionError
		if _, err := NormalizeSnapshot(v, []byte(`{}`)); !errors.As(err, &ve) {
			t.Errorf("version %q: %v", v, err)
		}
	}
}
