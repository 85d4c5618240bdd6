package loom

import (
	"encoding/json"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// verdictID is the reserved decision id of an operator's verdict on an
// in-doubt step attempt (K9.3).
func verdictID(stepID string, attempt int64) string {
	return "__loom_verdict:" + stepID + "#" + strconv.FormatInt(attempt, 10)
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
func (r *run) parkInDoubt(stepID string, attempt int64) {
	r.mu.Lock()
	r.unserved = true
	r.mu.Unlock()
	r.commit(event.EffectInDoubt, map[string]any{"stepId": stepID, "attempt": attempt}, nil)
	a := attempt
	r.park(suspendPayload{On: fold.GateInDoubt, StepID: stepID, Attempt: &a})
}

// serveInDoubt applies a recorded verdict, or parks again without one.
func (r *run) serveInDoubt(c *Context, t *Task, in json.RawMessage, fr fold.Frame, verdict *fold.Decision) (json.RawMessage, error) {
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
