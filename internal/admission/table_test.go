package admission

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/fold"
)

// Outcomes of a cell: what was admitted, or which refusal.
const (
	A  = "answer"      // a positional gate answer
	AW = "answer@wait" // a Select wait's answer
	TM = "timer"       // a timer's positional answer
	TW = "timer@wait"  // a Select timer wait's answer
	RD = "redrive"     // EXECUTION_RECOVERED
	RO = "reopen"      // a null EXECUTION_RESUMED on an ended execution
	VD = "verdict"     // an in-doubt verdict
	PI = "payload-invalid"
	K  = string(ReasonKernelEventType)
	NS = string(ReasonNotSuspended)
	GM = string(ReasonGateMismatch)
	NR = string(ReasonNotRecoverable)
	NF = string(ReasonNullAfterFailure)
	TN = string(ReasonTimerNotAllowed)
	TE = string(ReasonTerminal)
)

func outcome(a Admission, err error) string {
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) {
			return "error: " + err.Error()
		}
		if r.Kind == PayloadInvalid {
			return PI
		}
		return string(r.Reason)
	}
	if a.Action != ActionAnswer {
		return string(a.Action)
	}
	s := A
	if a.WakeAt != nil {
		s = TM
	}
	if a.WaitID != "" {
		s += "@wait"
	}
	return s
}

type cells map[string]string

// expected is the whole table, state by resume kind (spec §5). Every cell
// is written out: TestSpec5_AdmissionTable fails on a missing one.
var expected = map[string]cells{
	"pending": {
		"approve": NS, "reject": NS, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": NS, "__loom_diverged__+value": NS, "__loom_sleep__": K,
		"timer-due": NS, "timer-not-due": NS, "timer-wrong-wakeAt": NS, "timer-malformed": NS, "EXECUTION_RECOVERED": RD,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": NS, "schema-invalid": NS, "not-json": NS,
		"resumeAs": RD, "resumeAs-untyped": RD, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"running": {
		"approve": NS, "reject": NS, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": NS, "__loom_diverged__+value": NS, "__loom_sleep__": K,
		"timer-due": NS, "timer-not-due": NS, "timer-wrong-wakeAt": NS, "timer-malformed": NS, "EXECUTION_RECOVERED": RD,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": NS, "schema-invalid": NS, "not-json": NS,
		"resumeAs": RD, "resumeAs-untyped": RD, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"gate": {
		"approve": A, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TN, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": A, "schema-invalid": A, "not-json": PI,
		"resumeAs": A, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"gate+schema": {
		"approve": A, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TN, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": PI, "schema-invalid": PI, "not-json": PI,
		"resumeAs": A, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"gate+wakeAt": {
		"approve": A, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TM, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": A, "schema-invalid": A, "not-json": PI,
		"resumeAs": A, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"gate+failedWhileParked": {
		"approve": A, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TN, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": NF, "schema-invalid": A, "not-json": PI,
		"resumeAs": A, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"select": {
		"approve": AW, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TW, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": AW, "schema-invalid": AW, "not-json": PI,
		"resumeAs": AW, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"select+answered": {
		"approve": GM, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TN, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": GM, "schema-invalid": GM, "not-json": GM,
		"resumeAs": GM, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"indoubt": {
		"approve": PI, "reject": PI, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": PI, "__loom_indoubt__": PI, "__loom_diverged__": PI, "__loom_diverged__+value": PI, "__loom_sleep__": PI,
		"timer-due": PI, "timer-not-due": PI, "timer-wrong-wakeAt": PI, "timer-malformed": PI, "EXECUTION_RECOVERED": NR,
		"verdict": VD, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": PI, "schema-invalid": PI, "not-json": PI,
		"resumeAs": PI, "resumeAs-untyped": PI, "resumeAs-kernel": K, "resumeAs-reserved": PI,
	},
	"indoubt-nofact": {
		"approve": PI, "reject": PI, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": PI, "__loom_indoubt__": PI, "__loom_diverged__": PI, "__loom_diverged__+value": PI, "__loom_sleep__": PI,
		"timer-due": PI, "timer-not-due": PI, "timer-wrong-wakeAt": PI, "timer-malformed": PI, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": PI, "schema-invalid": PI, "not-json": PI,
		"resumeAs": PI, "resumeAs-untyped": PI, "resumeAs-kernel": K, "resumeAs-reserved": PI,
	},
	"diverged": {
		"approve": GM, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": A, "__loom_diverged__+value": PI, "__loom_sleep__": K,
		"timer-due": TN, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": GM, "schema-invalid": GM, "not-json": GM,
		"resumeAs": GM, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"sleep": {
		"approve": GM, "reject": GM, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": GM, "__loom_diverged__+value": GM, "__loom_sleep__": K,
		"timer-due": TM, "timer-not-due": TN, "timer-wrong-wakeAt": TN, "timer-malformed": TN, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": GM, "schema-invalid": GM, "not-json": GM,
		"resumeAs": GM, "resumeAs-untyped": GM, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"completed": {
		"approve": TE, "reject": TE, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": TE, "__loom_diverged__+value": TE, "__loom_sleep__": K,
		"timer-due": TE, "timer-not-due": TE, "timer-wrong-wakeAt": TE, "timer-malformed": TE, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": TE, "schema-invalid": TE, "not-json": TE,
		"resumeAs": RO, "resumeAs-untyped": RO, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"failed": {
		"approve": TE, "reject": TE, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": TE, "__loom_diverged__+value": TE, "__loom_sleep__": K,
		"timer-due": TE, "timer-not-due": TE, "timer-wrong-wakeAt": TE, "timer-malformed": TE, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": TE, "schema-invalid": TE, "not-json": TE,
		"resumeAs": RO, "resumeAs-untyped": RO, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"cancelled": {
		"approve": TE, "reject": TE, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": TE, "__loom_diverged__+value": TE, "__loom_sleep__": K,
		"timer-due": TE, "timer-not-due": TE, "timer-wrong-wakeAt": TE, "timer-malformed": TE, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": TE, "schema-invalid": TE, "not-json": TE,
		"resumeAs": RO, "resumeAs-untyped": RO, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
	"continued": {
		"approve": TE, "reject": TE, "STEP_COMPLETED": K, "EXECUTION_MIGRATED": K, "APPROVAL_GRANTED": K,
		"__loom_fork__": K, "__loom_indoubt__": K, "__loom_diverged__": TE, "__loom_diverged__+value": TE, "__loom_sleep__": K,
		"timer-due": TE, "timer-not-due": TE, "timer-wrong-wakeAt": TE, "timer-malformed": TE, "EXECUTION_RECOVERED": NR,
		"verdict": PI, "verdict-wrong-step": PI, "verdict-wrong-attempt": PI, "null": TE, "schema-invalid": TE, "not-json": TE,
		"resumeAs": RO, "resumeAs-untyped": RO, "resumeAs-kernel": K, "resumeAs-reserved": K,
	},
}

// TestSpec5_AdmissionTable runs every resume kind against every execution
// state and checks admitted-or-which-refusal against the table, which must
// hold every cell and nothing else.
func TestSpec5_AdmissionTable(t *testing.T) {
	states, kinds := tableStates(), resumeKinds()
	seen := map[string]bool{}
	for _, s := range states {
		seen[s.name] = true
		row, ok := expected[s.name]
		if !ok {
			t.Errorf("the table has no row for state %s", s.name)
			continue
		}
		st := s.log.fold()
		if st.Status != s.status {
			t.Fatalf("%s: the log folds to %s, want %s", s.name, st.Status, s.status)
		}
		schemas := mustSchemas(t, s.schemas)
		names := map[string]bool{}
		for _, k := range kinds {
			names[k.name] = true
			want, ok := row[k.name]
			if !ok {
				t.Errorf("%s × %s: the table has no cell", s.name, k.name)
				continue
			}
			if got := outcome(k.run(st, schemas)); got != want {
				t.Errorf("%s × %s = %s, want %s", s.name, k.name, got, want)
			}
		}
		for k := range row { //loom:order-independent reporting only
			if !names[k] {
				t.Errorf("%s: the table has a cell for unknown kind %s", s.name, k)
			}
		}
	}
	for name := range expected { //loom:order-independent reporting only
		if !seen[name] {
			t.Errorf("the table has a row for unknown state %s", name)
		}
	}
}

// TestSpec5_RefusalsSayWhatToDo: every refusal of the table is a *Refusal
// with a detail, a Reason exactly when it is Refused, the in-doubt gate on
// every refusal at an in-doubt park, and it never echoes the payload.
func TestSpec5_RefusalsSayWhatToDo(t *testing.T) {
	for _, s := range tableStates() {
		st := s.log.fold()
		for _, k := range resumeKinds() {
			_, err := k.run(st, mustSchemas(t, s.schemas))
			if err == nil {
				continue
			}
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("%s × %s: %T %v is not a *Refusal", s.name, k.name, err, err)
			}
			cell := s.name + " × " + k.name
			switch {
			case r.Detail == "":
				t.Errorf("%s: no detail", cell)
			case (r.Kind == Refused) != (r.Reason != ""):
				t.Errorf("%s: kind %s with reason %q", cell, r.Kind, r.Reason)
			case r.Rule < RuleKernelType || r.Rule > RuleVerdict:
				t.Errorf("%s: rule %d", cell, r.Rule)
			case strings.Contains(r.Error(), "forged") || strings.Contains(r.Error(), `"yes"`):
				t.Errorf("%s: the refusal echoes the payload: %s", cell, r.Error())
			}
			if strings.HasPrefix(s.name, "indoubt") && r.Kind == PayloadInvalid && r.Gate != fold.GateInDoubt {
				t.Errorf("%s: gate %q, want %q", cell, r.Gate, fold.GateInDoubt)
			}
		}
	}
}

// TestSpec5_AdmitNeverModifiesTheState: the gate is a pure function of a
// state it only reads.
func TestSpec5_AdmitNeverModifiesTheState(t *testing.T) {
	for _, s := range tableStates() {
		st := s.log.fold()
		before, err := fold.Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range resumeKinds() {
			_, _ = k.run(st, mustSchemas(t, s.schemas))
		}
		after, _ := fold.Encode(st)
		if string(before) != string(after) {
			t.Fatalf("%s: the state changed", s.name)
		}
	}
}

// TestReasonsAreTheRootStrings pins the Reason values to the root
// package's RefusalReason strings, which the runtime converts 1:1.
func TestReasonsAreTheRootStrings(t *testing.T) {
	got := []string{string(ReasonKernelEventType), string(ReasonNotSuspended), string(ReasonGateMismatch),
		string(ReasonNotRecoverable), string(ReasonNullAfterFailure), string(ReasonTimerNotAllowed), string(ReasonTerminal)}
	want := []string{"kernel-event-type", "not-suspended", "gate-mismatch", "not-recoverable",
		"null-answer-after-parked-failure", "timer-not-allowed", "terminal"}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reasons %v, want %v", got, want)
	}
}
