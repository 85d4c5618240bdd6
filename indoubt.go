package loom

import (
	"context"
	"encoding/json"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
)

// Verdict is an operator's answer to an in-doubt park: either the effect is
// known to have happened (Done, with its Output), or it must run again.
type Verdict struct {
	StepID  string
	Attempt int64
	Done    bool
	Output  json.RawMessage
}

// parkInDoubt records EFFECT_INDOUBT for a non-idempotent step whose start
// is durable and outcome unknown, then parks on the reserved in-doubt gate
// instead of running the effect a second time.
func (r *drive) parkInDoubt(c *Context, stepID string, attempt int64) {
	r.mu.Lock()
	c.causal.unserved = true
	r.mu.Unlock()
	r.commit(event.EffectInDoubt, map[string]any{"stepId": stepID, "attempt": attempt}, nil)
	a := attempt
	r.park(suspendPayload{On: fold.GateInDoubt, StepID: stepID, Attempt: &a})
}

// serveInDoubt applies a recorded verdict, or parks again without one.
func (r *drive) serveInDoubt(c *Context, t *Task, in json.RawMessage, fr fold.Frame, verdict *fold.Decision) (json.RawMessage, error) {
	var v admission.VerdictChoice
	if verdict == nil || unmarshalRecorded(verdict.Choice, &v) != nil {
		a := fr.Attempt
		r.park(suspendPayload{On: fold.GateInDoubt, StepID: t.ID, Attempt: &a})
	}
	r.observeStep(c, t.ID, true)
	if v.Verdict == admission.VerdictDone {
		out := orNull(v.Output)
		r.commit(event.StepCompleted, map[string]any{"stepId": t.ID, "output": out}, nil)
		r.stepDurability()
		return out, nil
	}
	return r.runLive(c, t, in, fr.Attempt+1)
}

// ResolveInDoubt answers an execution parked because a crash interrupted a
// NonIdempotent step, so nobody knows whether its effect happened: Done
// with Output serves the step as done; otherwise it runs again as a new
// attempt, under a new idempotency key. The verdict is recorded (a kernel
// DECISION_RECORDED keyed by the step and attempt, beside a null
// EXECUTION_RESUMED, K9.3) and the execution drives on. A verdict for
// another step or attempt than the parked one, or without the kernel's
// EFFECT_INDOUBT fact, is refused with nothing appended.
func (rt *Runtime) ResolveInDoubt(ctx context.Context, id string, v Verdict) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "resume", id, "", true); err != nil {
		return err
	}
	var a admission.Admission
	return rt.transact(ctx, id, txSpec{
		op:  "resolve",
		pin: true,
		admit: func(ctx context.Context, tx *txn) (err error) {
			a, err = admission.AdmitVerdict(tx.state, admission.Verdict(v))
			return refusalError(id, err)
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			return true, commitAdmitted(tx.j, a, nil)
		},
	})
}
