package loom

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
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
	} else if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "resume", id, o.flowID, true); err != nil {
		return err
	}
	var (
		target    *Flow
		principal json.RawMessage
		a         admission.Admission
		migration map[string]any
	)
	if o.flowID != "" {
		f, ok := rt.flows[o.flowID]
		if !ok {
			return rt.unknownFlow(o.flowID)
		}
		target = f
	}
	return rt.transact(ctx, id, txSpec{
		op: "resume-as",
		admit: func(ctx context.Context, tx *txn) (err error) {
			tx.simulate = tx.simulate || o.simulate
			if target == nil {
				target = tx.x.flow
			}
			switch st := tx.state.Status; {
			case st == fold.StatusSuspended:
				// Its payload is the parked gate's answer: identity first,
				// then every rule Resume enforces, under the target's schemas.
				if principal, err = rt.authenticate(ctx, id, ev); err != nil {
					return err
				}
			case !st.Terminal():
				// A crashed execution: a re-drive of any kind waits out
				// another node's live lease.
				if err := rt.vetoRedrive(ctx, id, tx.state); err != nil {
					return err
				}
			}
			ae := admission.Event{Type: ev.EventType, Payload: ev.Payload}
			if a, err = admission.AdmitResumeAs(tx.state, rt.schemas[target.ID], ae, rt.cfg.Clock.Now().UnixMilli()); err != nil {
				return refusalError(id, err)
			}
			if migration, err = rt.migration(tx.state, tx.x.flow, target, o); err != nil {
				return err
			}
			if migration == nil {
				// Nothing moves the code pin: the recorded one must match.
				if err := checkCodePin(id, tx.state, target); err != nil {
					return err
				}
			}
			tx.x.flow, tx.workflowID = target, target.ID
			return nil
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			if migration != nil {
				if _, err := tx.j.Commit(event.ExecutionMigrated, migration, nil); err != nil {
					return false, err
				}
			}
			return true, commitAdmitted(tx.j, a, principal)
		},
	})
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
	// toCodeHash is always recorded, even empty: the migration moves the
	// code pin to exactly the target's.
	m := map[string]any{"fromFlowHash": st.Variables.FlowHash, "toFlowHash": to.flowHash(), "toCodeHash": to.CodeFingerprint}
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
