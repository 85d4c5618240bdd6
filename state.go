package loom

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

// loaded is an execution's state read from the stores, with what a drive
// needs besides: the flow id and the number of events read from the log.
type loaded struct {
	state      fold.State
	workflowID string
	eventsRead int
}

// load folds an execution from its latest usable snapshot and the tail of
// its log. A snapshot that is unreadable, or ahead of the log, is ignored:
// the log is always authoritative.
func (rt *Runtime) load(ctx context.Context, id string) (loaded, error) {
	base, from := fold.Initial(), int64(0)
	if rt.cfg.Snapshots != nil {
		snap, ok, err := rt.cfg.Snapshots.LoadLatest(ctx, id)
		if err != nil {
			return loaded{}, err
		}
		if ok {
			if s, err := snapshot.Decode(snap.SchemaVersion, snap.State); err == nil {
				base, from = s, snap.Sequence+1
			} else {
				rt.cfg.Logger.Warn("loom: snapshot ignored", "execution", id, "sequence", snap.Sequence, "error", err)
			}
		}
	}
	tail, err := rt.cfg.Events.ReadFrom(ctx, id, from)
	if err != nil {
		return loaded{}, err
	}
	l := loaded{eventsRead: len(tail)}
	switch {
	case len(tail) > 0:
		l.workflowID = tail[0].WorkflowID
	case from > 0:
		// Check the snapshot's event exists: a snapshot must never be ahead
		// of the log it summarizes.
		at, err := store.ReadRange(ctx, rt.cfg.Events, id, from-1, from)
		if err != nil {
			return loaded{}, err
		}
		if len(at) != 1 {
			rt.cfg.Logger.Warn("loom: snapshot ahead of the log ignored", "execution", id, "sequence", from-1)
			return rt.loadLog(ctx, id)
		}
		l.eventsRead = 1
		l.workflowID = at[0].WorkflowID
	default:
		return loaded{}, fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	l.state = fold.FoldFrom(base, tail)
	return l, nil
}

// loadLog folds the whole log, ignoring snapshots.
func (rt *Runtime) loadLog(ctx context.Context, id string) (loaded, error) {
	evs, err := rt.cfg.Events.ReadFrom(ctx, id, 0)
	if err != nil {
		return loaded{}, err
	}
	if len(evs) == 0 {
		return loaded{}, fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	return loaded{state: fold.Fold(evs), workflowID: evs[0].WorkflowID, eventsRead: len(evs)}, nil
}

// LoadState returns an execution's current folded state: the live one while
// this process runs it, else its snapshot plus log tail (so a park is read
// from the store, which another process may have moved). With an
// Authorizer it is a "query".
func (rt *Runtime) LoadState(ctx context.Context, id string) (fold.State, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return fold.State{}, err
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return fold.State{}, err
	}
	if x := rt.liveExecution(id); x != nil {
		rt.mu.Lock()
		r := x.drive
		rt.mu.Unlock()
		if r != nil && !r.isParked() {
			return r.j.State(), nil
		}
	}
	l, err := rt.load(ctx, id)
	return l.state, err
}

// LoadStateAt returns the state after the event at sequence at (time
// travel): the snapshot at or below it plus the events up to it.
func (rt *Runtime) LoadStateAt(ctx context.Context, id string, at int64) (fold.State, error) {
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return fold.State{}, err
	}
	base, from := fold.Initial(), int64(0)
	if rt.cfg.Snapshots != nil {
		if snap, ok, err := rt.cfg.Snapshots.LoadAt(ctx, id, at); err == nil && ok {
			if s, err := snapshot.Decode(snap.SchemaVersion, snap.State); err == nil {
				base, from = s, snap.Sequence+1
			}
		}
	}
	evs, err := store.ReadRange(ctx, rt.cfg.Events, id, from, at+1)
	if err != nil {
		return fold.State{}, err
	}
	if from == 0 && len(evs) == 0 {
		return fold.State{}, fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	return fold.FoldFrom(base, evs), nil
}

// foldTail folds the events read after st, checking that they continue it
// without a gap.
func foldTail(id string, st fold.State, tail []event.Envelope) (fold.State, error) {
	for i, e := range tail {
		if want := st.Sequence + 1 + int64(i); e.Sequence != want {
			return fold.State{}, fmt.Errorf("loom: log of %q: sequence %d where %d was expected: the log is corrupt or was read out of order", id, e.Sequence, want)
		}
	}
	return fold.FoldFrom(st, tail), nil
}
