package loom

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Human steps. A human step is a task of kind "human": its outcome is a
// person's answer instead of an effect's result. Ask records the step's
// start (STEP_STARTED, kind "human"), parks the execution on a gate named
// by the step — the park records the step (condition.stepId, which only
// the kernel sets: Suspend has no way to give one) — and, once a Resume
// answers that gate, records the answer as the step's output
// (STEP_COMPLETED). The answer is one entry of the execution's recorded
// answers (_resumePayloads), consumed in order with the gates' (spec §5,
// ADR 0104): live when the step completes, and on every later replay past
// the completed step, so a gate after it gets its own answer, never the
// step's.

// HumanStepReusedError refuses a human step whose id this run already
// asked: each human step answers one recorded answer, so a second Ask of
// the same id would take the next gate's. Use a distinct id per ask (append
// the loop index).
type HumanStepReusedError struct {
	ID string
}

func (e *HumanStepReusedError) Error() string {
	return "loom: human step " + strconv.Quote(e.ID) + " was already asked in this run: each human step takes one answer, " +
		"so give each ask its own id (e.g. append the loop index)"
}

// Ask is a human step: it parks the execution on the gate stepID until a
// Resume of that gate answers it (loom resume <id> --event <stepID>), and
// returns the answer, recorded as the step's output. A WithResumeSchema of
// the gate stepID checks the answer at the ingress gate before anything is
// recorded; Timeout and CorrelationKey work as for Suspend. When the flow
// re-runs, a completed human step returns its recorded output and runs
// nothing. stepID is a step id and a gate name at once: it must be valid
// as both (no __loom_ prefix, no kernel event type), and asked once per
// run (*HumanStepReusedError).
func (c *Context) Ask(stepID string, opts ...SuspendOption) (json.RawMessage, error) {
	c.checkpoint()
	if err := event.ValidateID("step id", stepID); err != nil {
		return nil, err
	}
	if err := validateGate(stepID); err != nil {
		return nil, err
	}
	var o suspendOptions
	for _, opt := range opts {
		opt(&o)
	}
	r := c.drive
	r.mu.Lock()
	_, seen := r.issued[stepID]
	if !seen {
		r.issued[stepID] = issue{decision: true}
	}
	r.mu.Unlock()
	if seen {
		return nil, &HumanStepReusedError{ID: stepID}
	}
	p := suspendPayload{On: stepID, StepID: stepID, CorrelationKey: o.correlationKey}
	if o.timeout != nil {
		if err := c.needTimers("a human step with a Timeout"); err != nil {
			return nil, err
		}
		ms := o.timeout.Milliseconds()
		wake := c.recordedNow() + ms
		p.TimeoutMs, p.WakeAt = &ms, &wake
	}
	var fr fold.Frame
	var exists bool
	c.state(func(s *fold.State) { fr, exists = s.Frames[stepID] })
	r.observeStep(c, stepID, !exists)
	if exists && fr.Status == fold.FrameCompleted {
		// Replay past the completed step: its answer is consumed here, in
		// order with the gates', as it was live.
		c.servePositional(stepID)
		return fr.Output, nil
	}
	if !exists {
		if r.verifying() {
			r.reach(frontier{kind: frontierStep, id: stepID})
		}
		start := map[string]any{"stepId": stepID, "input": json.RawMessage("null"), "attempt": int64(1), "kind": "human"}
		if c.branch != "" {
			start["branch"] = c.branch
		}
		r.commit(event.StepStarted, start, nil)
	}
	for {
		if answer, ok := c.servePositional(stepID); ok {
			r.commit(event.StepCompleted, map[string]any{"stepId": stepID, "output": orNull(answer)}, nil)
			r.stepDurability()
			return orNull(answer), nil
		}
		c.wait(p)
	}
}

// Ask is the typed form of Context.Ask: the person's answer decoded into T.
func Ask[T any](ctx *Context, stepID string, opts ...SuspendOption) (T, error) {
	var v T
	raw, err := ctx.Ask(stepID, opts...)
	if err != nil {
		return v, err
	}
	if err := decodeInto(raw, &v); err != nil {
		return v, fmt.Errorf("loom: human step %q: decoding the answer: %w", stepID, err)
	}
	return v, nil
}
