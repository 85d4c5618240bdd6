package loom

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// ResumeAs re-opens an execution, optionally onto another flow
// (OntoFlow) or with a migrated input (MigrateInput), per spec §5:
//
//   - onto a crashed execution (running, no driver) it re-drives it: no
//     EXECUTION_RESUMED is recorded; migrating onto fixed code is the exit
//     from a flow that cannot replay;
//   - onto an ended execution it records a null EXECUTION_RESUMED (status
//     only) and drives it again;
//   - onto a parked execution ev answers the recorded gate, under every rule
//     Resume enforces, with the TARGET flow's resume schemas.
//
// Only the kernel-namespace rule applies to the first two. A migration is
// recorded as EXECUTION_MIGRATED before anything else; a failing transform
// refuses with nothing appended.
func (rt *Runtime) ResumeAs(ctx context.Context, id string, ev ResumeEvent, opts ...ResumeOption) error {
	o := resumeOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if ev.EventType != "" {
		if err := checkEdge(id, ev); err != nil {
			return err
		}
		if err := kernelNamespace(id, ev); err != nil {
			return err
		}
	}
	if err := rt.authorize(ctx, "resume", id, o.flowID, true); err != nil {
		return err
	}
	x, l, err := rt.claimLoaded(ctx, id)
	if err != nil {
		return err
	}
	fail := func(err error) error { rt.release(x); return err }
	target := x.flow
	if o.flowID != "" {
		f, ok := rt.flows[o.flowID]
		if !ok {
			return fail(fmt.Errorf("%w: %q", ErrUnknownFlow, o.flowID))
		}
		target = f
	}
	var principal json.RawMessage
	var a admission
	parked := l.state.Status == fold.StatusSuspended
	if parked {
		if principal, err = rt.authenticate(ctx, id, ev); err != nil {
			return fail(err)
		}
		if a, err = rt.admit(id, l.state, target, ev); err != nil {
			return fail(err)
		}
	}
	migration, err := rt.migration(l.state, x.flow, target, o)
	if err != nil {
		return fail(err)
	}
	x.flow = target
	j := rt.newJournal(id, target.ID, l.state)
	if err := rt.takeOver(ctx, j); err != nil {
		return fail(err)
	}
	j.workflowID = target.ID
	j.meta = driveMeta(l.state, o.simulate)
	var commits []pendingEvent
	if migration != nil {
		commits = append(commits, pendingEvent{typ: event.ExecutionMigrated, payload: migration})
	}
	switch {
	case parked:
		commits = append(commits, answerEvents(ev, principal, a)...)
	case l.state.Status.Terminal():
		commits = append(commits, pendingEvent{typ: event.ExecutionResumed})
	default:
		commits = append(commits, pendingEvent{typ: event.ExecutionRecovered, payload: map[string]any{"reason": "resumeAs"}})
	}
	if err := commitAll(j, commits); err != nil {
		return fail(err)
	}
	if err := j.barrier(ctx); err != nil {
		return fail(err)
	}
	rt.drive(x, j, o.simulate || forkSimulated(l.state))
	return nil
}

// pendingEvent is an event a gate transaction is about to commit.
type pendingEvent struct {
	typ     string
	payload any
	meta    map[string]json.RawMessage
}

// migration builds EXECUTION_MIGRATED when the flow or the input changes.
func (rt *Runtime) migration(st fold.State, from, to *Flow, o resumeOptions) (map[string]any, error) {
	if from == to && o.transform == nil {
		return nil, nil
	}
	m := map[string]any{"fromFlowHash": st.Variables.FlowHash, "toFlowHash": to.flowHash()}
	if to.CodeFingerprint != "" {
		m["toCodeHash"] = to.CodeFingerprint
	}
	if o.transform != nil {
		in, err := o.transform(orNull(st.Variables.Input))
		if err != nil {
			return nil, fmt.Errorf("loom: input migration refused: %w", err)
		}
		if !json.Valid(in) {
			return nil, fmt.Errorf("loom: input migration refused: the transform returned invalid JSON")
		}
		m["migratedInput"] = json.RawMessage(in)
	}
	return m, nil
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
	x, l, err := rt.claimLoaded(ctx, id)
	if err != nil {
		return err
	}
	park := l.state.Variables.SuspendedOn
	_, fact := l.state.Variables.InDoubt[fold.InDoubtKey(v.StepID, v.Attempt)]
	if l.state.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt ||
		park.StepID != v.StepID || park.Attempt == nil || *park.Attempt != v.Attempt || !fact {
		rt.release(x)
		return &ResumePayloadValidationError{ExecutionID: id, Gate: fold.GateInDoubt,
			Detail: "the verdict does not answer the parked in-doubt step attempt"}
	}
	choice := verdictChoice{Verdict: "rerun"}
	if v.Done {
		choice = verdictChoice{Verdict: "done", Output: orNull(v.Output)}
	}
	j := rt.newJournal(id, l.workflowID, l.state)
	j.meta = driveMeta(l.state, false)
	if err := rt.takeOver(ctx, j); err != nil {
		rt.release(x)
		return err
	}
	kernel := map[string]json.RawMessage{"kernel": json.RawMessage("true")}
	if _, err := j.commit(event.DecisionRecorded, map[string]any{"decisionId": verdictID(v.StepID, v.Attempt), "choice": choice}, kernel); err != nil {
		rt.release(x)
		return err
	}
	if _, err := j.commit(event.ExecutionResumed, nil, nil); err != nil {
		rt.release(x)
		return err
	}
	if err := j.barrier(ctx); err != nil {
		rt.release(x)
		return err
	}
	rt.drive(x, j, forkSimulated(l.state))
	return nil
}
