package crashtest_test

import (
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/crashtest"
)

// The K9 half of the kit must be able to fail too: these tests break the
// recovery of the payment flow on purpose and assert that Check reports
// the in-doubt, effect-once and sink-once properties.

// stepOf returns the stepId of a step event's payload.
func stepOf(e event.Envelope) string {
	var p struct {
		StepID string `json:"stepId"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.StepID
}

// startPoint returns the kill point that leaves step's STEP_STARTED the last
// durable event of the reference log: its index plus one.
func startPoint(t *testing.T, ref crashtest.Reference, step string) int {
	t.Helper()
	for i, e := range ref.Log {
		if e.Type == event.StepStarted && stepOf(e) == step {
			return i + 1
		}
	}
	t.Fatalf("the reference log has no STEP_STARTED of %s", step)
	return 0
}

// forgetNonIdempotentStarts turns every STEP_STARTED of a non-idempotent
// step into an inert event, keeping its sequence: the recovering runtime no
// longer knows the step began, so it runs it again instead of parking it in
// doubt — the silent double effect K9 forbids.
func forgetNonIdempotentStarts(e event.Envelope) event.Envelope {
	if e.Type == event.StepStarted {
		for _, id := range crashtest.NonIdempotentStepIDs {
			if stepOf(e) == id {
				e.Type = "crashtest.forgotten"
			}
		}
	}
	return e
}

func paymentReference(t *testing.T, d int) crashtest.Reference {
	t.Helper()
	ref, err := crashtest.RunReference(testContext(t), memStores(), crashtest.Payment, crashtest.Durabilities[d])
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestCheckReportsARecoveryThatRerunsAnInDoubtStep(t *testing.T) {
	for d, mode := range crashtest.Durabilities {
		t.Run(crashtest.DurabilityName(mode), func(t *testing.T) {
			ctx := testContext(t)
			ref := paymentReference(t, d)
			for _, id := range crashtest.NonIdempotentStepIDs {
				// After its start: the effect acted in the crashed process.
				acted := crashtest.Case{Variant: crashtest.Payment, Durability: mode, KillAfter: startPoint(t, ref, id)}
				// Inside its effect, before it acts: it never did.
				neverActed := crashtest.Case{Variant: crashtest.Payment, Durability: mode, KillInEffect: id}

				// An honest recovery parks the step in doubt, with the verdict
				// the world supports.
				for c, done := range map[*crashtest.Case]bool{&acted: true, &neverActed: false} {
					out, err := crashtest.CheckOutcome(ctx, memStores(), ref, *c)
					if err != nil {
						t.Fatalf("%s with an honest recovery: %v", c.Name(), err)
					}
					if len(out.InDoubt) != 1 || out.InDoubt[0].StepID != id || out.InDoubt[0].Attempt != 1 || out.InDoubt[0].Done != done {
						t.Fatalf("%s: in-doubt parks %v, want %s#1 with done=%v", c.Name(), out.InDoubt, id, done)
					}
				}

				// A recovery blind to the start runs the step again: no park,
				// and where the crashed process had acted, a second effect.
				acted.Recovery = breakRecovery(forgetNonIdempotentStarts)
				err := crashtest.Check(ctx, memStores(), ref, acted)
				if !crashtest.Violated(err, crashtest.PropInDoubt) || !crashtest.Violated(err, crashtest.PropEffectOnce) {
					t.Errorf("%s: a recovery that re-runs an in-doubt step was not reported as %s and %s; Check said: %v",
						acted.Name(), crashtest.PropInDoubt, crashtest.PropEffectOnce, err)
				}
				neverActed.Recovery = breakRecovery(forgetNonIdempotentStarts)
				err = crashtest.Check(ctx, memStores(), ref, neverActed)
				if !crashtest.Violated(err, crashtest.PropInDoubt) {
					t.Errorf("%s: a recovery that skips the in-doubt park was not reported as %s; Check said: %v",
						neverActed.Name(), crashtest.PropInDoubt, err)
				}
				if crashtest.Violated(err, crashtest.PropEffectOnce) {
					t.Errorf("%s: the effect never acted before the crash, so one run after it is no double effect; Check said: %v",
						neverActed.Name(), err)
				}
			}
		})
	}
}

func TestCheckReportsASinkDeliveryUnderANewKey(t *testing.T) {
	// receipt's interrupted start is read back as attempt 7: the re-run of
	// the same attempt delivers under a key the sink has not seen, so the
	// receiver performs it twice.
	renumber := func(e event.Envelope) event.Envelope {
		if e.Type == event.StepStarted && stepOf(e) == "receipt" {
			var p map[string]json.RawMessage
			if json.Unmarshal(e.Payload, &p) == nil {
				p["attempt"] = json.RawMessage(`7`)
				e.Payload, _ = json.Marshal(p)
			}
		}
		return e
	}
	for d, mode := range crashtest.Durabilities {
		t.Run(crashtest.DurabilityName(mode), func(t *testing.T) {
			ctx := testContext(t)
			ref := paymentReference(t, d)
			c := crashtest.Case{Variant: crashtest.Payment, Durability: mode, KillAfter: startPoint(t, ref, "receipt")}
			if err := crashtest.Check(ctx, memStores(), ref, c); err != nil {
				t.Fatalf("%s with an honest recovery: %v", c.Name(), err)
			}
			c.Recovery = breakRecovery(renumber)
			err := crashtest.Check(ctx, memStores(), ref, c)
			if !crashtest.Violated(err, crashtest.PropSinkOnce) {
				t.Fatalf("%s: a re-run under a new idempotency key was not reported as %s; Check said: %v",
					c.Name(), crashtest.PropSinkOnce, err)
			}
			if crashtest.Violated(err, crashtest.PropEffectOnce) || crashtest.Violated(err, crashtest.PropInDoubt) {
				t.Fatalf("%s: only the sink step was disturbed, yet Check reported a non-idempotent step: %v", c.Name(), err)
			}
		})
	}
}

func TestCheckRefusesAMalformedCase(t *testing.T) {
	ctx := testContext(t)
	ref := crashtest.Reference{Variant: crashtest.Payment, Events: 14}
	for _, c := range []crashtest.Case{
		{Variant: crashtest.Payment, KillAfter: 3, KillInEffect: "charge"}, // two crash points
		{Variant: crashtest.Payment, KillInEffect: "price"},                // an idempotent step
		{Variant: crashtest.Order, KillInEffect: "charge"},                 // no such step in the order flow
		{Variant: crashtest.Order, KillAfter: 3},                           // a reference of another variant
	} {
		if err := crashtest.Check(ctx, memStores(), ref, c); err == nil || crashtest.Violated(err, crashtest.PropRun) {
			t.Errorf("%s accepted (%v)", c.Name(), err)
		}
	}
}
