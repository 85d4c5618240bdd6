package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/admission"
)

// ResumeOption configures Resume and ResumeAs.
type ResumeOption func(*resumeOptions)

type resumeOptions struct {
	simulate  bool
	flowID    string
	transform func(input json.RawMessage) (json.RawMessage, error)
}

// Simulate drives the resumed run in simulate mode: steps run their
// simulation (or for real only when read-only), nothing acts for real.
func Simulate() ResumeOption { return func(o *resumeOptions) { o.simulate = true } }

// OntoFlow makes ResumeAs continue the execution under another registered
// flow (EXECUTION_MIGRATED moves its code pin).
func OntoFlow(flowID string) ResumeOption { return func(o *resumeOptions) { o.flowID = flowID } }

// MigrateInput makes ResumeAs record transform(input) as the execution's new
// input (EXECUTION_MIGRATED.migratedInput, K11.5). A failing transform
// refuses the resume with nothing appended.
func MigrateInput(transform func(input json.RawMessage) (json.RawMessage, error)) ResumeOption {
	return func(o *resumeOptions) { o.transform = transform }
}

// Resume answers the gate an execution is parked on and drives it on (spec
// §5). It returns once the answer is durable; the flow then continues in the
// background. Every refusal — a kernel event type, an unauthenticated or
// unauthorized caller, an execution not parked or parked on another gate, a
// null answer after a parked failure, a payload its resume schema rejects —
// is a typed error and appends nothing. A resume with EventType
// EXECUTION_RECOVERED re-drives a crashed (running) execution instead.
func (rt *Runtime) Resume(ctx context.Context, id string, ev ResumeEvent, opts ...ResumeOption) error {
	o := resumeOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkEdge(id, ev); err != nil {
		return err
	}
	if err := kernelNamespace(id, ev); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "resume", id, "", true); err != nil {
		return err
	}
	principal, err := rt.authenticate(ctx, id, ev)
	if err != nil {
		return err
	}
	return rt.resume(ctx, id, ev, principal, o)
}

// resume is Resume past identity: the kernel's own resumes (a timer) start
// here, since no caller stands behind them.
func (rt *Runtime) resume(ctx context.Context, id string, ev ResumeEvent, principal json.RawMessage, o resumeOptions) error {
	if ev.EventType == event.ExecutionRecovered {
		return rt.redrive(ctx, id, o.simulate)
	}
	for {
		if handled, err := rt.resumeSticky(ctx, id, ev, principal, o.simulate); handled {
			return err
		}
		if !rt.awaitStickyPark(ctx, id) {
			break
		}
	}
	var a admission.Admission
	return rt.transact(ctx, id, txSpec{
		op:  "resume",
		pin: true,
		admit: func(ctx context.Context, tx *txn) (err error) {
			tx.simulate = tx.simulate || o.simulate
			a, err = rt.admit(id, tx.state, tx.x.flow, ev)
			return err
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			return true, commitAdmitted(tx.j, a, principal)
		},
		durable: func(ctx context.Context, tx *txn) { rt.afterAnswer(ctx, id, tx.state, ev) },
	})
}

// claimLoaded claims an execution not driven by this process and loads it.
// An execution this process is driving is refused as not-suspended (it is
// running); one whose drive is ending is waited for.
// With anyFlow an execution of a flow this runtime does not register is
// claimed too, under a stand-in flow that can never be driven: for
// operations that only record a fact (MarkShredded).
func (rt *Runtime) claimLoaded(ctx context.Context, id string, anyFlow bool) (*execution, loaded, error) {
	for {
		if err := rt.evictSticky(ctx, id); err != nil {
			return nil, loaded{}, err
		}
		if x := rt.liveExecution(id); x != nil {
			rt.mu.Lock()
			r := x.drive
			changed := rt.changedChanLocked()
			rt.mu.Unlock()
			if r != nil && !r.stopped() && !r.j.Ended() {
				return nil, loaded{}, &ResumeRefusedError{ExecutionID: id, Reason: RefusedNotSuspended,
					Detail: "the execution is running; retry once it is parked"}
			}
			// A drive that is parking or ending, or a claim with no drive
			// yet (a start): wait for it to end, to be launched — or to
			// park in place, which keeps the claim until the park is
			// evicted above.
			select {
			case <-x.done:
			case <-changed:
			case <-ctx.Done():
				return nil, loaded{}, ctx.Err()
			}
			continue
		}
		l, err := rt.load(ctx, id)
		if err != nil {
			return nil, loaded{}, err
		}
		flow, ok := rt.flows[l.workflowID]
		switch {
		case !ok && anyFlow:
			flow = &Flow{ID: l.workflowID} // no Body: a txSpec with anyFlow never drives
		case !ok:
			return nil, loaded{}, fmt.Errorf("execution %q: %w", id, rt.unknownFlow(l.workflowID))
		}
		x, err := rt.claim(id, flow)
		if errors.Is(err, errBusy) {
			continue
		}
		if err != nil {
			return nil, loaded{}, err
		}
		// Under the claim, fold whatever another caller appended since.
		tail, err := rt.cfg.Events.ReadFrom(ctx, id, l.state.Sequence+1)
		if err == nil {
			l.state, err = foldTail(l.state, tail)
		}
		if err != nil {
			rt.release(x)
			return nil, loaded{}, err
		}
		l.eventsRead += len(tail)
		return x, l, nil
	}
}

// redrive resumes a crashed execution: EXECUTION_RECOVERED, no gate
// answer. Only a running (or pending) execution no live driver holds is
// re-driven: another node's live lease refuses it with
// *ExecutionBusyError, nothing written.
func (rt *Runtime) redrive(ctx context.Context, id string, simulate bool) error {
	var a admission.Admission
	return rt.transact(ctx, id, txSpec{
		op:      "redrive",
		redrive: true, pin: true,
		admit: func(ctx context.Context, tx *txn) (err error) {
			tx.simulate = tx.simulate || simulate
			a, err = admission.AdmitRedrive(tx.state)
			return refusalError(id, err)
		},
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			return true, commitAdmitted(tx.j, a, nil)
		},
	})
}
