package crashtest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
)

// PaymentFlowID is the payment flow: the matrix's second variant, for K9
// (non-idempotent effects and idempotency keys). It runs under ExecutionID
// too, and answers the same Gate.
const PaymentFlowID = "crashtest.payment"

// PaymentStepIDs are the payment flow's five durable steps, in order. The
// flow is sequential, so its log has the same order in every run.
var PaymentStepIDs = []string{"price", "charge", "receipt", "ship", "notice"}

// NonIdempotentStepIDs are the payment flow's steps declared
// loom.NonIdempotent: each acts on World.Charged, and a recovery that finds
// its start durable and its outcome lost must park it in doubt.
var NonIdempotentStepIDs = []string{"charge", "ship"}

// SinkStepIDs are the payment flow's idempotent steps that deliver to the
// counting sink World.Delivered under loom.IdempotencyKey: a crash re-run
// of the same attempt delivers again under the same key.
var SinkStepIDs = []string{"receipt", "notice"}

// Charge is the charge step's output.
type Charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Shipment is the ship step's output.
type Shipment struct {
	ID       string `json:"id"`
	Approver string `json:"approver"`
}

// PaymentResult is the payment flow's output: it depends on every step's
// output and the gate's answer, so a wrong replay or verdict shows in the
// state.
type PaymentResult struct {
	Charge   Charge   `json:"charge"`
	Receipt  string   `json:"receipt"`
	Shipment Shipment `json:"shipment"`
	Notice   string   `json:"notice"`
}

// nonIdempotent defines a step declared loom.NonIdempotent that acts on
// w.Charged under its idempotency key and returns f(in). When the world's
// kill switch is armed for it, the process dies on entry, before the step
// acts: its start is durable and nothing happened.
func nonIdempotent[In, Out any](w *World, id string, f func(In) Out) *loom.Step[In, Out] {
	return loom.NewStep(id, func(ctx context.Context, in In) (Out, error) {
		var out Out
		if w.tripKill(id) {
			return out, ErrKilled
		}
		out = f(in)
		raw, err := json.Marshal(out)
		if err != nil {
			return out, err
		}
		if err := act(ctx, w.Charged, id, raw); err != nil {
			return out, err
		}
		w.Counters.hit(id)
		return out, nil
	}, loom.NonIdempotent())
}

// delivering defines an idempotent step that delivers f(in) to the counting
// sink w.Delivered under its idempotency key.
func delivering[In any](w *World, id string, f func(In) string) *loom.Step[In, string] {
	return loom.NewStep(id, func(ctx context.Context, in In) (string, error) {
		out := f(in)
		raw, err := json.Marshal(out)
		if err != nil {
			return "", err
		}
		if err := act(ctx, w.Delivered, id, raw); err != nil {
			return "", err
		}
		w.Counters.hit(id)
		return out, nil
	})
}

// act records an effect at sink s under the key of the attempt running
// under ctx; an effect without a key is a runtime bug and fails the step.
func act(ctx context.Context, s *Sink, step string, payload json.RawMessage) error {
	key := loom.IdempotencyKey(ctx)
	if key == "" {
		return fmt.Errorf("crashtest: step %s ran without an idempotency key", step)
	}
	s.Deliver(step, key, payload)
	return nil
}

// NewPaymentFlow builds the payment flow over world w: price (counted),
// charge (non-idempotent), receipt (to the sink), the gate, ship
// (non-idempotent) and notice (to the sink). Build one per runtime;
// runtimes that stand for the same world share w.
func NewPaymentFlow(w *World) *loom.Flow {
	price := counted(w.Counters, "price", func(q int) int { return q * 1250 })
	charge := nonIdempotent(w, "charge", func(in Input) Charge {
		return Charge{ID: "ch-" + in.Order, Amount: in.Qty * 1250}
	})
	receipt := delivering(w, "receipt", func(c Charge) string { return fmt.Sprintf("receipt %s for %d", c.ID, c.Amount) })
	ship := nonIdempotent(w, "ship", func(a Approval) Shipment { return Shipment{ID: "sh-" + a.Approver, Approver: a.Approver} })
	notice := delivering(w, "notice", func(s Shipment) string { return "shipped " + s.ID })

	body := func(ctx *loom.Context, in Input) (PaymentResult, error) {
		var res PaymentResult
		amount, err := loom.Run(ctx, price, in.Qty)
		if err != nil {
			return res, err
		}
		ch, err := loom.Run(ctx, charge, Input{Order: in.Order, Qty: amount / 1250})
		if err != nil {
			return res, err
		}
		rcpt, err := loom.Run(ctx, receipt, ch)
		if err != nil {
			return res, err
		}
		ok, err := loom.Suspend[Approval](ctx, Gate)
		if err != nil {
			return res, err
		}
		sh, err := loom.Run(ctx, ship, ok)
		if err != nil {
			return res, err
		}
		note, err := loom.Run(ctx, notice, sh)
		if err != nil {
			return res, err
		}
		return PaymentResult{Charge: ch, Receipt: rcpt, Shipment: sh, Notice: note}, nil
	}
	return loom.NewFlow(PaymentFlowID, body, loom.WithResumeSchema(Gate, ApprovalSchema))
}
