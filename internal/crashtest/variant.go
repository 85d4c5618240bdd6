package crashtest

import (
	"fmt"

	"github.com/loom-kernel/loom"
)

// Variant is a flow the matrix runs: each has its own reference run and its
// own cases, over the same checks.
type Variant int

const (
	// Order is the order flow (NewFlow): counted steps, a decision, a
	// Parallel block and a gate. Its cases keep the names they had before
	// there were variants: "<durability>/kill-after-<n>".
	Order Variant = iota
	// Payment is the payment flow (NewPaymentFlow): non-idempotent steps a
	// recovery must park in doubt rather than run twice, and idempotent
	// steps delivering to a counting sink. Its cases are named
	// "payment/<durability>/<point>", and include a kill inside each
	// non-idempotent effect (Case.KillInEffect).
	Payment
)

// Variants are the flows Run checks, in order.
var Variants = []Variant{Order, Payment}

// String names the variant: "order" or "payment".
func (v Variant) String() string {
	switch v {
	case Order:
		return "order"
	case Payment:
		return "payment"
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}

// flowSpec is what the checks need to know about a variant's flow.
type flowSpec struct {
	flowID        string
	steps         []string // every durable step id, in the order the flow issues them
	decisions     []string // recorded decision ids
	nonIdempotent []string // steps declared loom.NonIdempotent, acting on World.Charged
	sinks         []string // steps delivering to World.Delivered
	build         func(*World) *loom.Flow
}

// counted returns the ids the world's counters count: steps and decisions.
func (f flowSpec) counted() []string {
	return append(append([]string(nil), f.steps...), f.decisions...)
}

// spec describes v's flow; an unknown variant is a bug of the kit and
// panics.
func (v Variant) spec() flowSpec {
	switch v {
	case Order:
		return flowSpec{flowID: FlowID, steps: StepIDs, decisions: []string{DecisionID},
			build: func(w *World) *loom.Flow { return NewFlow(w.Counters) }}
	case Payment:
		return flowSpec{flowID: PaymentFlowID, steps: PaymentStepIDs, nonIdempotent: NonIdempotentStepIDs,
			sinks: SinkStepIDs, build: NewPaymentFlow}
	}
	panic(fmt.Sprintf("crashtest: unknown variant %d", int(v)))
}

// prefix is the variant's part of a case name: none for Order, whose names
// predate variants.
func (v Variant) prefix() string {
	if v == Order {
		return ""
	}
	return v.String() + "/"
}
