package loom

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Cancel ends an execution with EXECUTION_CANCELLED (K8). A running drive
// stops: its effects see their context cancelled and no step starts after
// the cancel is committed; the cancel is durable when Cancel returns. An
// execution that already ended is refused (RefusedTerminal), nothing
// appended.
func (rt *Runtime) Cancel(ctx context.Context, id, reason string) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return err
	}
	if err := rt.authorize(ctx, "cancel", id, "", true); err != nil {
		return err
	}
	payload := map[string]any{"reason": bounded(reason)}
	for {
		if x := rt.liveExecution(id); x != nil {
			rt.mu.Lock()
			r := x.run
			rt.mu.Unlock()
			if r == nil || r.stopped() || r.j.ended() {
				select {
				case <-x.done:
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return r.cancelRun(ctx, payload)
		}
		x, l, err := rt.claimLoaded(ctx, id)
		if err != nil {
			return err
		}
		defer rt.release(x)
		if l.state.Status.Terminal() {
			return &ResumeRefusedError{ExecutionID: id, Reason: RefusedTerminal, Detail: "the execution has already ended"}
		}
		j := rt.newJournal(id, l.workflowID, l.state)
		defer j.settle()
		if err := rt.takeOver(ctx, j); err != nil {
			return err
		}
		if _, err := j.commitTerminal(event.ExecutionCancelled, payload, nil); err != nil {
			return err
		}
		return j.barrier(ctx)
	}
}

// cancelRun cancels a live drive through its own journal (the sole writer).
func (r *run) cancelRun(ctx context.Context, payload any) error {
	r.mu.Lock()
	r.cancelled = true
	r.mu.Unlock()
	r.root.stop.Store(true)
	r.cancel()
	if _, err := r.j.commitTerminal(event.ExecutionCancelled, payload, nil); err != nil {
		if err == errSealed {
			return &ResumeRefusedError{ExecutionID: r.x.id, Reason: RefusedTerminal, Detail: "the execution ended first"}
		}
		return err
	}
	return r.j.barrier(ctx)
}

// bounded cuts s to fold.MaxReasonBytes on a rune boundary.
func bounded(s string) string {
	if len(s) <= fold.MaxReasonBytes {
		return s
	}
	cut := fold.MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// recordDenial appends EXECUTION_DENIED to an existing execution, through
// its live journal when this process drives it. Best effort: a denial of an
// unknown or busy execution is not recorded.
func (rt *Runtime) recordDenial(ctx context.Context, id, action, reason string) {
	payload := map[string]any{"action": action, "reason": bounded(reason)}
	if x := rt.liveExecution(id); x != nil {
		rt.mu.Lock()
		r := x.run
		rt.mu.Unlock()
		if r != nil {
			if _, err := r.j.commit(event.ExecutionDenied, payload, nil); err == nil {
				_ = r.j.barrier(ctx)
			}
		}
		return
	}
	l, err := rt.load(ctx, id)
	if err != nil {
		return
	}
	x, err := rt.claim(id, rt.flows[l.workflowID])
	if err != nil {
		return
	}
	defer rt.release(x)
	if l, err = rt.load(ctx, id); err != nil {
		return
	}
	j := rt.newJournal(id, l.workflowID, l.state)
	defer j.settle()
	if err := rt.takeOver(ctx, j); err != nil {
		return
	}
	if _, err := j.commit(event.ExecutionDenied, payload, nil); err == nil {
		if err := j.barrier(ctx); err != nil {
			rt.cfg.Logger.Warn("loom: denial not recorded", "execution", id, "error", err)
		}
	}
}

// Recover re-drives every execution a stopped process left running: each
// gets EXECUTION_RECOVERED (never EXECUTION_RESUMED) and replays from its
// log, so completed steps are served and only unfinished work runs. It also
// starts the successor of a continued execution whose process stopped
// before it could. It returns how many executions it re-drove or started.
// Executions this process drives are skipped.
func (rt *Runtime) Recover(ctx context.Context) (int, error) {
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
			if gone, err := rt.abandoned(ctx, info.ExecutionID, l.state); err != nil {
				return n, err
			} else if !gone {
				continue // another node drives it: its lease (or its recent activity) says so
			}
			err = rt.Resume(ctx, info.ExecutionID, ResumeEvent{EventType: event.ExecutionRecovered})
			switch {
			case err == nil:
				n++
			case isRefusal(err):
				// Someone else moved it since the listing: not ours.
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

func isRefusal(err error) bool {
	_, ok := err.(*ResumeRefusedError)
	return ok
}
