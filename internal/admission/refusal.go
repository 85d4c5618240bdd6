package admission

import (
	"strconv"

	"github.com/loom-kernel/loom/internal/schema"
)

// Kind says which of the runtime's two refusal errors a Refusal becomes.
type Kind string

// The refusal kinds.
const (
	// Refused is the ingress gate's refusal: loom.ResumeRefusedError with
	// Reason.
	Refused Kind = "refused"
	// PayloadInvalid refuses the answer itself (a resume schema failed, an
	// in-doubt park got anything but a verdict for the parked attempt, a
	// reserved gate got a value): loom.ResumePayloadValidationError.
	PayloadInvalid Kind = "payload-invalid"
)

// Reason names why a resume was Refused. The values are exactly those of
// the root package's RefusalReason constants, so the runtime converts one
// into the other without a table.
type Reason string

// The reasons Admit and its siblings give.
const (
	ReasonKernelEventType  Reason = "kernel-event-type"
	ReasonNotSuspended     Reason = "not-suspended"
	ReasonGateMismatch     Reason = "gate-mismatch"
	ReasonNotRecoverable   Reason = "not-recoverable"
	ReasonNullAfterFailure Reason = "null-answer-after-parked-failure"
	ReasonTimerNotAllowed  Reason = "timer-not-allowed"
	ReasonTerminal         Reason = "terminal"
)

// Rule names the rule of the ingress gate that refused, in the order the
// rules run (see the package documentation). The first rule a resume breaks
// is the one that refuses it.
type Rule int

// The rules, in order.
const (
	RuleKernelType       Rule = iota + 1 // 1: a kernel event type, whatever the state
	RuleRedrive                          // 2: EXECUTION_RECOVERED only for a running or pending execution
	RuleInDoubt                          // 3: an in-doubt park takes only a verdict
	RuleReserved                         // 4: the reserved __loom_ namespace
	RuleTerminal                         // 5: an ended execution
	RuleParked                           // 6: the execution must be parked
	RuleGate                             // 7: the event must be the parked gate, an open wait or a recorded timer
	RuleNullAfterFailure                 // 8: no null answer after a parked failure
	RuleShape                            // 9: a reserved gate takes null; UTF-8 JSON; the resume schema
	RuleVerdict                          // a verdict must answer the parked attempt beside its fact
)

var ruleNames = [...]string{"", "kernel-type", "redrive", "in-doubt", "reserved", "terminal",
	"parked", "gate", "null-after-failure", "shape", "verdict"}

func (r Rule) String() string {
	if r > 0 && int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return "rule(" + strconv.Itoa(int(r)) + ")"
}

// Refusal is why a resume was not admitted. Nothing was appended; the
// execution is unchanged and, if parked, still resumable. Detail says what
// to do instead and never echoes the payload.
type Refusal struct {
	Kind Kind
	// Reason is set when Kind is Refused and empty for PayloadInvalid.
	Reason Reason
	// Gate is the gate the refusal concerns: the parked gate, fold.GateInDoubt
	// at an in-doubt park, or the resume's event type for a schema failure.
	// Empty when nothing is parked.
	Gate   string
	Detail string
	// Rule is the rule that refused.
	Rule Rule
	// Violations say where and how a payload fails the gate's resume
	// schema (PayloadInvalid at the shape rule); never the payload itself.
	Violations []schema.Violation
}

func (r *Refusal) Error() string {
	s := "admission: resume " + string(r.Kind)
	if r.Reason != "" {
		s += ": " + string(r.Reason)
	}
	if r.Gate != "" {
		s += " (gate " + strconv.Quote(r.Gate) + ")"
	}
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	return s
}

func refused(rule Rule, reason Reason, gate, detail string) *Refusal {
	return &Refusal{Kind: Refused, Reason: reason, Gate: gate, Detail: detail, Rule: rule}
}

func invalid(rule Rule, gate, detail string) *Refusal {
	return &Refusal{Kind: PayloadInvalid, Gate: gate, Detail: detail, Rule: rule}
}
