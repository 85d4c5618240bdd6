package loom

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom/fold"
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

// recoverPass is one recovery pass. An automatic pass without leases also
// waits out an execution's recent activity, since nothing else says
// whether another process still drives it.
func (rt *Runtime) recoverPass(ctx context.Context, automatic bool) (int, error) {
	n, after := 0, ""
	for {
		page, err := rt.cfg.Events.ListExecutions(ctx, after, 256)
		if err != nil {
			return n, err
		}
		for _, info := range page.Executions {
			if rt.liveExecution(info.ExecutionID) != nil {
				continue
			}
			if _, ok := rt.flows[info.WorkflowID]; !ok {
				continue
			}
			l, err := rt.load(ctx, info.ExecutionID)
			if err != nil {
				return n, err
			}
			if started, err := rt.recoverSuccessor(ctx, info.ExecutionID, rt.flows[info.WorkflowID], l.state); err != nil {
				return n, err
			} else if started {
				n++
				continue
			}
			if park := l.state.Variables.SuspendedOn; l.state.Status == fold.StatusSuspended && park != nil && park.On == gateSelect {
				rt.deliver(ctx, info.ExecutionID) // a message that arrived while no process listened
				continue
			}
			if s := l.state.Status; s != fold.StatusRunning && s != fold.StatusPending {
				continue
			}
			if automatic && rt.cfg.Leases == nil && rt.cfg.Clock.Now().UnixMilli()-l.state.UpdatedAt < rt.leaseTTL() {
				continue // perhaps another process drives it; the next pass looks again
			}
			// Recovery is the kernel's own act: no caller stands behind it,
			// so neither the ResumeAuthenticator nor the Authorizer is asked.
			err = rt.redrive(ctx, info.ExecutionID, false)
			var (
				busy     *ExecutionBusyError
				mismatch *FlowCodeMismatchError
			)
			switch {
			case err == nil:
				n++
			case errors.As(err, &mismatch):
				// Not this code's to replay: an operator moves it (ResumeAs
				// with OntoFlow) or declares the pin compatible.
				rt.cfg.Logger.Warn("loom: crashed execution not recovered", "execution", info.ExecutionID, "error", err)
			case errors.As(err, &busy), isRefusal(err):
				// Another node drives it (its lease, or its recent activity,
				// says so), or someone moved it since the listing: not ours.
			default:
				return n, fmt.Errorf("loom: recovering %q: %w", info.ExecutionID, err)
			}
		}
		if page.Next == "" {
			return n, nil
		}
		after = page.Next
	}
}

// isRefusal says err is the ingress gate's refusal (*ResumeRefusedError,
// or an error that wraps one).
func isRefusal(err error) bool {
	var rr *ResumeRefusedError
	return errors.As(err, &rr)
}
