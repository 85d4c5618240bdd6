package loom

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/journal"
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
			r := x.drive
			changed := rt.changedChanLocked()
			rt.mu.Unlock()
			if r != nil && !r.stopped() && !r.j.Ended() {
				err := r.cancelRun(ctx, payload)
				if err == nil {
					// The drive may have ended before the cancel was
					// durable, and so before it could tell its parent.
					rt.ended(ctx, id, r.j.State())
				}
				return err
			}
			// Parking, ending, or claimed by a transaction: once it is
			// released (or launched) look again.
			select {
			case <-x.done:
			case <-changed:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		var ended fold.State
		err := rt.transact(ctx, id, txSpec{
			op:      "cancel",
			durable: func(ctx context.Context, tx *txn) { ended = tx.j.State() },
			admit: func(ctx context.Context, tx *txn) error {
				if tx.state.Status.Terminal() {
					return &ResumeRefusedError{ExecutionID: id, Reason: RefusedTerminal, Detail: "the execution has already ended"}
				}
				return nil
			},
			commit: func(ctx context.Context, tx *txn) (bool, error) {
				_, err := tx.j.CommitTerminal(event.ExecutionCancelled, payload, nil)
				return false, err
			},
		})
		if rr := (*ResumeRefusedError)(nil); errors.As(err, &rr) && rr.Reason == RefusedNotSuspended {
			continue // a drive of this process took it in between: cancel that one
		}
		if err == nil {
			rt.ended(ctx, id, ended)
		}
		return err
	}
}

// cancelRun cancels a live drive through its own journal (the sole writer).
func (r *drive) cancelRun(ctx context.Context, payload any) error {
	r.mu.Lock()
	r.cancelled = true
	r.mu.Unlock()
	r.root.stop.Store(true)
	r.cancel()
	if _, err := r.j.CommitTerminal(event.ExecutionCancelled, payload, nil); err != nil {
		if errors.Is(err, journal.ErrSealed) {
			return &ResumeRefusedError{ExecutionID: r.x.id, Reason: RefusedTerminal, Detail: "the execution ended first"}
		}
		return err
	}
	return r.j.Barrier(context.WithoutCancel(ctx))
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
// its live journal when this process drives it. An execution this process
// is parking, ending or claiming is waited for (as Cancel waits), so a
// denial is never dropped for a moment's business; a denial of an unknown
// execution, or one whose caller's context ends first, is not recorded
// (logged when the store fails).
func (rt *Runtime) recordDenial(ctx context.Context, id, action, reason string) {
	payload := map[string]any{"action": action, "reason": bounded(reason)}
	for {
		x := rt.liveExecution(id)
		if x == nil {
			break
		}
		rt.mu.Lock()
		r := x.drive
		changed := rt.changedChanLocked()
		rt.mu.Unlock()
		if r != nil && !r.stopped() && !r.j.Ended() {
			if _, err := r.j.Commit(event.ExecutionDenied, payload, nil); err == nil {
				_ = r.j.Barrier(context.WithoutCancel(ctx))
				return
			}
			// The drive ended meanwhile: look again.
		}
		select {
		case <-x.done:
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
	err := rt.transact(ctx, id, txSpec{
		op: "deny",
		commit: func(ctx context.Context, tx *txn) (bool, error) {
			_, err := tx.j.Commit(event.ExecutionDenied, payload, nil)
			return false, err
		},
	})
	if err != nil && !errors.Is(err, ErrExecutionNotFound) && !isRefusal(err) {
		rt.cfg.Logger.Warn("loom: denial not recorded", "execution", id, "error", err)
	}
}
