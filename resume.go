package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
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
	for ev.EventType != event.ExecutionRecovered {
		if handled, err := rt.resumeSticky(ctx, id, ev, principal, o.simulate); handled {
			return err
		}
		if !rt.awaitStickyPark(ctx, id) {
			break
		}
	}
	x, l, err := rt.claimLoaded(ctx, id)
	if err != nil {
		return err
	}
	if ev.EventType == event.ExecutionRecovered {
		return rt.redrive(x, l, o.simulate || forkSimulated(l.state))
	}
	a, err := rt.admit(id, l.state, x.flow, ev)
	if err != nil {
		rt.release(x)
		return err
	}
	j := rt.newJournal(id, l.workflowID, l.state)
	j.meta = driveMeta(l.state, o.simulate)
	if err := rt.takeOver(ctx, j); err != nil {
		rt.release(x)
		return err
	}
	if err := commitAll(j, answerEvents(ev, principal, a)); err != nil {
		rt.release(x)
		return err
	}
	if err := j.barrier(ctx); err != nil {
		rt.release(x)
		return err
	}
	rt.afterAnswer(ctx, id, l.state, ev)
	rt.drive(x, j, o.simulate || forkSimulated(l.state))
	return nil
}

// claimLoaded claims an execution not driven by this process and loads it.
// An execution this process is driving is refused as not-suspended (it is
// running); one whose drive is ending is waited for.
func (rt *Runtime) claimLoaded(ctx context.Context, id string) (*execution, loaded, error) {
	for {
		if err := rt.evictSticky(ctx, id); err != nil {
			return nil, loaded{}, err
		}
		if x := rt.liveExecution(id); x != nil {
			rt.mu.Lock()
			r := x.run
			changed := rt.stickyChangedChanLocked()
			rt.mu.Unlock()
			if r != nil && !r.stopped() && !r.j.ended() {
				return nil, loaded{}, &ResumeRefusedError{ExecutionID: id, Reason: RefusedNotSuspended,
					Detail: "the execution is running; retry once it is parked"}
			}
			// A drive that is parking or ending, or a claim with no drive
			// yet (a start): wait for it to end — or to park in place,
			// which keeps the claim until the park is evicted above.
			select {
			case <-x.done:
				continue
			case <-changed:
				continue
			case <-time.After(10 * time.Millisecond): // a start's drive may just run on: look again
				continue
			case <-ctx.Done():
				return nil, loaded{}, ctx.Err()
			}
		}
		l, err := rt.load(ctx, id)
		if err != nil {
			return nil, loaded{}, err
		}
		flow, ok := rt.flows[l.workflowID]
		if !ok {
			return nil, loaded{}, fmt.Errorf("%w: %q (execution %q)", ErrUnknownFlow, l.workflowID, id)
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
		if err != nil {
			rt.release(x)
			return nil, loaded{}, err
		}
		l.state = fold.FoldFrom(l.state, tail)
		l.eventsRead += len(tail)
		return x, l, nil
	}
}

// redrive resumes a crashed execution: EXECUTION_RECOVERED, no gate answer.
func (rt *Runtime) redrive(x *execution, l loaded, simulate bool) error {
	if st := l.state.Status; st != fold.StatusRunning && st != fold.StatusPending {
		rt.release(x)
		return &ResumeRefusedError{ExecutionID: x.id, Reason: RefusedNotRecoverable,
			Detail: "only a running execution with no driver can be recovered; it is " + string(st)}
	}
	j := rt.newJournal(x.id, l.workflowID, l.state)
	j.meta = driveMeta(l.state, simulate)
	if err := rt.takeOver(context.Background(), j); err != nil {
		rt.release(x)
		return err
	}
	if _, err := j.commit(event.ExecutionRecovered, map[string]any{"reason": "re-driven after its driver stopped"}, nil); err != nil {
		rt.release(x)
		return err
	}
	if err := j.barrier(context.Background()); err != nil {
		rt.release(x)
		return err
	}
	rt.drive(x, j, simulate)
	return nil
}
