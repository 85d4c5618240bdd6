package loom

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// verdictID is the reserved decision id of an operator's verdict on an
// in-doubt step attempt (K9.3).
func verdictID(stepID string, attempt int64) string {
	return reservedPrefix + "verdict:" + stepID + "#" + strconv.FormatInt(attempt, 10)
}

// Verdict is an operator's answer to an in-doubt park: either the effect is
// known to have happened (Done, with its Output), or it must run again.
type Verdict struct {
	StepID  string
	Attempt int64
	Done    bool
	Output  json.RawMessage
}

type verdictChoice struct {
	Verdict string          `json:"verdict"` // "done" or "rerun"
	Output  json.RawMessage `json:"output,omitempty"`
}

// parkInDoubt records EFFECT_INDOUBT for a non-idempotent step whose start
// is durable and outcome unknown, then parks on the reserved in-doubt gate
// instead of running the effect a second time.
func (r *drive) parkInDoubt(stepID string, attempt int64) {
	r.mu.Lock()
	r.unserved = true
	r.mu.Unlock()
	r.commit(event.EffectInDoubt, map[string]any{"stepId": stepID, "attempt": attempt}, nil)
	a := attempt
	r.park(suspendPayload{On: fold.GateInDoubt, StepID: stepID, Attempt: &a})
}

// serveInDoubt applies a recorded verdict, or parks again without one.
func (r *drive) serveInDoubt(c *Context, t *Task, in json.RawMessage, fr fold.Frame, verdict *fold.Decision) (json.RawMessage, error) {
	var v verdictChoice
	if verdict == nil || json.Unmarshal(verdict.Choice, &v) != nil {
		a := fr.Attempt
		r.park(suspendPayload{On: fold.GateInDoubt, StepID: t.ID, Attempt: &a})
	}
	r.observeStep(c, t.ID, true)
	if v.Verdict == "done" {
		out := orNull(v.Output)
		r.commit(event.StepCompleted, map[string]any{"stepId": t.ID, "output": out}, nil)
		r.stepDurability()
		return out, nil
	}
	return r.runLive(c, t, in, fr.Attempt+1)
}

// ResolveInDoubt records an operator's verdict on an in-doubt park (K9.3):
// a kernel DECISION_RECORDED keyed by the step and attempt, beside a null
// EXECUTION_RESUMED, then drives the execution on — serving the step as
// done with v.Output, or running it again as a new attempt. A verdict for
// another step or attempt than the parked one, or without the kernel's
// EFFECT_INDOUBT fact, is refused with nothing appended.
func (rt *Runtime) ResolveInDoubt(ctx context.Context, id string, v Verdict) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "resume", id, "", true); err != nil {
		return err
	}
	choice := verdictChoice{Verdict: "rerun"}
	if v.Done {
		choice = verdictChoice{Verdict: "done", Output: orNull(v.Output)}
	}
	return rt.transact(ctx, id, txSpec{
		pin: true,
		admit: func(ctx context.Context, tx *txn) error {
			st := tx.state
			park := st.Variables.SuspendedOn
			_, fact := st.Variables.InDoubt[fold.InDoubtKey(v.StepID, v.Attempt)]
			if st.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt ||
				park.StepID != v.StepID || park.Attempt == nil || *park.Attempt != v.Attempt || !fact {
				return &ResumePayloadValidationError{ExecutionID: id, Gate: fold.GateInDoubt,
					Detail: "the verdict does not answer the parked in-doubt step attempt; read the park with LoadState (suspendedOn.stepId, .attempt) and answer that"}
			}
			return nil
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			return true, commitAll(tx.j, []pendingEvent{
				{typ: event.DecisionRecorded, payload: map[string]any{"decisionId": verdictID(v.StepID, v.Attempt), "choice": choice}, meta: kernelStamp()},
				{typ: event.ExecutionResumed},
			})
		},
	})
}
