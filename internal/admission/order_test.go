package admission

import (
	"errors"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// TestSpec5_RuleOrder pits rules against each other: each resume breaks
// (at least) two rules and the earlier one must refuse it. want is the
// refusing rule, or 0 when the resume is admitted.
func TestSpec5_RuleOrder(t *testing.T) {
	states := map[string]tableState{}
	for _, s := range tableStates() {
		states[s.name] = s
	}
	timedSchema := tableState{name: "gate+wakeAt+schema", log: states["gate+wakeAt"].log, schemas: true}
	failedSchema := tableState{name: "gate+failedWhileParked+schema", log: states["gate+failedWhileParked"].log, schemas: true}
	cases := []struct {
		name  string
		state tableState
		typ   string
		body  string
		now   int64
		want  Rule
		why   string
	}{
		{"kernel type before in-doubt", states["indoubt"], event.StepCompleted, `{"stepId":"pay"}`, wakeAt, RuleKernelType,
			"a genuine kernel type is refused as one whatever the state"},
		{"kernel type before terminal", states["completed"], event.ExecutionMigrated, `{}`, wakeAt, RuleKernelType, ""},
		{"kernel type before parked", states["running"], event.ApprovalGranted, `{}`, wakeAt, RuleKernelType, ""},
		{"kernel type before gate", states["gate"], event.ExecutionCompleted, `{}`, wakeAt, RuleKernelType, ""},
		{"re-drive before in-doubt", states["indoubt"], event.ExecutionRecovered, ``, wakeAt, RuleRedrive,
			"a recovery pass racing a park sees not-recoverable"},
		{"re-drive before terminal", states["failed"], event.ExecutionRecovered, ``, wakeAt, RuleRedrive, ""},
		{"in-doubt before reserved: the in-doubt gate's own name", states["indoubt"], fold.GateInDoubt, ``, wakeAt, RuleInDoubt,
			"the bug this package fixes: it was refused kernel-event-type"},
		{"in-doubt before reserved: another reserved name", states["indoubt"], "__loom_fork__", `{}`, wakeAt, RuleInDoubt, ""},
		{"in-doubt before gate: a timer", states["indoubt"], event.TimerFired, timerAt(wakeAt), wakeAt, RuleInDoubt, ""},
		{"in-doubt without its fact", states["indoubt-nofact"], "approve", `{}`, wakeAt, RuleInDoubt, ""},
		{"reserved before terminal", states["cancelled"], "__loom_fork__", `{}`, wakeAt, RuleReserved, ""},
		{"reserved before parked", states["running"], GateSleep, ``, wakeAt, RuleReserved, ""},
		{"reserved before gate: a sleep by name", states["sleep"], GateSleep, ``, wakeAt, RuleReserved,
			"only the sleep's timer wakes it"},
		{"reserved before gate: a select by name", states["select"], GateSelect, `{}`, wakeAt, RuleReserved, ""},
		{"terminal before gate", states["completed"], "reject", `{}`, wakeAt, RuleTerminal, ""},
		{"terminal before timer", states["continued"], event.TimerFired, timerAt(wakeAt), wakeAt, RuleTerminal, ""},
		{"parked before gate", states["running"], "reject", `{}`, wakeAt, RuleParked, ""},
		{"parked before timer", states["pending"], event.TimerFired, `nonsense`, wakeAt, RuleParked, ""},
		{"gate before null-after-failure", states["gate+failedWhileParked"], "reject", `null`, wakeAt, RuleGate, ""},
		{"gate before shape: schema", states["gate+schema"], "reject", `{"approved":"yes"}`, wakeAt, RuleGate,
			"identity before shape: a gate-mismatch, not the schema's verdict"},
		{"gate before shape: not JSON", states["gate"], "reject", `{`, wakeAt, RuleGate, ""},
		{"gate before shape: a value at the diverged park", states["diverged"], "approve", `{"x":1}`, wakeAt, RuleGate, ""},
		{"a decided select before its open gate", states["select+answered"], "approve", `{}`, wakeAt, RuleGate, ""},
		{"a decided select before its timer", states["select+answered"], event.TimerFired, timerAt(wakeAt), wakeAt, RuleGate, ""},
		{"timer: an unrecorded instant, not yet due", states["gate+wakeAt"], event.TimerFired, timerAt(wakeAt + 1), wakeAt, RuleGate, ""},
		{"null-after-failure before schema", failedSchema, "approve", `null`, wakeAt, RuleNullAfterFailure,
			"the null is refused for the failure, not for the schema"},
		{"shape: a value at the diverged park", states["diverged"], fold.GateDiverged, `{"x":1}`, wakeAt, RuleShape, ""},
		{"shape: the schema", states["gate+schema"], "approve", `{"approved":"yes"}`, wakeAt, RuleShape, ""},
		{"shape: not JSON, no schema", states["gate"], "approve", `{"approved":`, wakeAt, RuleShape, ""},
		{"shape: not UTF-8", states["gate"], "approve", "\"\xff\"", wakeAt, RuleShape, ""},
		{"a timer's answer skips shape", timedSchema, event.TimerFired, timerAt(wakeAt), wakeAt, 0,
			"the schema is the gate's resume's, not the timer's"},
		{"a timer's answer skips null-after-failure", states["gate+failedWhileParked"], "approve", `{"approved":true}`, wakeAt, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.state.log.fold()
			_, err := Admit(st, mustSchemas(t, c.state.schemas), Event{Type: c.typ, Payload: raw(c.body)}, c.now)
			var r *Refusal
			switch {
			case c.want == 0 && err != nil:
				t.Fatalf("refused: %v (%s)", err, c.why)
			case c.want == 0:
			case !errors.As(err, &r):
				t.Fatalf("err = %v, want a refusal by rule %s (%s)", err, c.want, c.why)
			case r.Rule != c.want:
				t.Fatalf("refused by rule %s (%v), want %s (%s)", r.Rule, err, c.want, c.why)
			}
		})
	}
}

// TestSpec5_KernelNamespaceIsRuleOne: the state-free check the runtime runs
// before identity refuses exactly what rule 1 refuses, so running it early
// never changes an outcome, and leaves the reserved names to the state.
func TestSpec5_KernelNamespaceIsRuleOne(t *testing.T) {
	types := append(event.KnownTypes(), "approve", "", fold.GateInDoubt, fold.GateDiverged, GateSleep, GateSelect, "__loom_fork__")
	st := newLog().started().suspend(`{"on":"approve"}`).fold()
	for _, typ := range types {
		early := KernelNamespace(typ)
		_, err := Admit(st, nil, Event{Type: typ, Payload: raw(`{}`)}, wakeAt)
		var r *Refusal
		byRuleOne := errors.As(err, &r) && r.Rule == RuleKernelType
		if (early != nil) != byRuleOne {
			t.Errorf("%q: KernelNamespace %v, Admit %v", typ, early, err)
		}
		if typ == event.TimerFired || typ == event.ExecutionRecovered {
			if early != nil {
				t.Errorf("%s is the spec's exception and must pass: %v", typ, early)
			}
		} else if event.IsKnown(typ) && early == nil {
			t.Errorf("kernel type %s passed", typ)
		}
	}
}
