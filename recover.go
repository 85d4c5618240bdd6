package loom

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Recover re-drives every execution a stopped process left running: each
// gets EXECUTION_RECOVERED (never EXECUTION_RESUMED) and replays from its
// log, so completed steps are served and only unfinished work runs. It also
// starts the successor of a continued execution whose process stopped
// before it could. It returns how many executions it re-drove or started.
// Executions this process drives are skipped.
func (rt *Runtime) Recover(ctx context.Context) (int, error) {
	return rt.recoverPass(ctx, false)
}

// recoverPeriodically is automatic recovery: a pass at start, then one
// every Config.Recovery.Interval until the runtime closes.
func (rt *Runtime) recoverPeriodically() {
	defer rt.wg.Done()
	tick := time.NewTicker(rt.cfg.Recovery.Interval)
	defer tick.Stop()
	for {
		if n, err := rt.recoverPass(rt.ctx, true); err != nil && rt.ctx.Err() == nil {
			rt.cfg.Logger.Warn("loom: recovery pass failed; the next one retries", "error", err)
		} else if n > 0 {
			rt.cfg.Logger.Info("loom: recovered executions a stopped process left running", "count", n)
		}
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// recoverPass is one recovery pass: over the store's index of unfinished
// executions when it keeps one (O(unfinished), not O(all)), else over
// every execution. Through the index, parked executions are looked at only
// when Features.Inbox or Features.Children is on (a message or a child's
// end may have come while no process listened; otherwise a park has
// nothing recovery could do), and then by Recover and every
// Recovery.ParkedEvery-th automatic pass, the first one included; the
// other passes act on running and continued entries, so many parked
// executions cost them no load. An automatic pass without leases also
// waits out an execution's recent activity, since nothing else says
// whether another process still drives it.
func (rt *Runtime) recoverPass(ctx context.Context, automatic bool) (int, error) {
	parked := rt.cfg.Features.Inbox || rt.cfg.Features.Children
	if automatic {
		rt.mu.Lock()
		every := rt.cfg.Recovery.ParkedEvery
		parked = parked && (rt.automaticPasses == 0 || every > 0 && rt.automaticPasses%every == 0)
		rt.automaticPasses++
		rt.mu.Unlock()
	}
	list := func(after string) ([]candidate, string, error) {
		page, err := rt.cfg.Events.ListExecutions(ctx, after, 256)
		out := make([]candidate, len(page.Executions))
		for i, e := range page.Executions {
			out[i] = candidate{e.ExecutionID, e.WorkflowID}
		}
		return out, page.Next, err
	}
	if idx, ok := rt.cfg.Events.(store.StatusIndex); ok {
		list = func(after string) ([]candidate, string, error) {
			page, err := idx.ListUnfinished(ctx, after, 256)
			var out []candidate
			for _, e := range page.Executions {
				if e.Status != store.UnfinishedSuspended || parked {
					out = append(out, candidate{e.ExecutionID, e.WorkflowID})
				}
			}
			return out, page.Next, err
		}
	}
	n, after := 0, ""
	for {
		page, next, err := list(after)
		if err != nil {
			return n, err
		}
		for _, c := range page {
			did, err := rt.recoverOne(ctx, c.id, automatic)
			if err != nil {
				return n, err
			}
			if did {
				n++
			}
		}
		if next == "" {
			return n, nil
		}
		after = next
	}
}

// candidate is an execution a recovery pass looks at.
type candidate struct{ id, workflowID string }

// isRefusal says err is the ingress gate's refusal (*ResumeRefusedError,
// or an error that wraps one).
func isRefusal(err error) bool {
	var rr *ResumeRefusedError
	return errors.As(err, &rr)
}

// recoverOne does what recovery owes one execution: start the successor a
// continued one never got, deliver a message a select park never heard
// of, or re-drive a crashed one. It reports whether it re-drove or started
// one.
func (rt *Runtime) recoverOne(ctx context.Context, id string, automatic bool) (bool, error) {
	if rt.liveExecution(id) != nil {
		return false, nil
	}
	l, err := rt.load(ctx, id)
	if err != nil {
		return false, err
	}
	// The flow the latest event names, not the listing's (the first
	// event's): a ResumeAs onto another flow moves an execution.
	flow, ok := rt.flows[l.workflowID]
	if !ok {
		return false, nil
	}
	if started, err := rt.recoverSuccessor(ctx, id, flow, l.state); err != nil || started {
		return started, err
	}
	if awaitsMessage(l.state) {
		rt.deliver(ctx, id) // a message that arrived while no process listened
		return false, nil
	}
	if rt.cfg.Features.Children && !l.state.Status.Terminal() && rt.orphaned(ctx, l.state) {
		// Its parent ended and a crash kept it from closing this child.
		if err := rt.Cancel(ctx, id, "its parent ended"); err != nil && !isRefusal(err) {
			return false, fmt.Errorf("loom: recovering %q: cancelling a child whose parent ended: %w", id, err)
		}
		return false, nil
	}
	if _, ok := awaitsChild(l.state); ok {
		rt.deliverChild(ctx, id) // a child that ended while no process listened
		return false, nil
	}
	if s := l.state.Status; s != fold.StatusRunning && s != fold.StatusPending {
		return false, nil
	}
	if automatic && rt.cfg.Leases == nil && rt.cfg.Clock.Now().UnixMilli()-l.state.UpdatedAt < rt.leaseTTL() {
		return false, nil // perhaps another process drives it; the next pass looks again
	}
	// Recovery is the kernel's own act: no caller stands behind it, so
	// neither the ResumeAuthenticator nor the Authorizer is asked.
	err = rt.redrive(ctx, id, false)
	var (
		busy     *ExecutionBusyError
		mismatch *FlowCodeMismatchError
	)
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &mismatch):
		// Not this code's to replay: an operator moves it (ResumeAs with
		// OntoFlow) or declares the pin compatible.
		rt.cfg.Logger.Warn("loom: crashed execution not recovered", "execution", id, "error", err)
	case errors.As(err, &busy), isRefusal(err):
		// Another node drives it (its lease, or its recent activity, says
		// so), or someone moved it since the listing: not ours.
	default:
		return false, fmt.Errorf("loom: recovering %q: %w", id, err)
	}
	return false, nil
}
