package loom

import (
	"context"
	"errors"
	"fmt"
	"math"

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
// the log is always authoritative. A compacted execution whose compaction
// snapshot does not load is refused with *CompactedHistoryError; a gap met
// while a concurrent Compact moved the tail's start is read again once.
func (rt *Runtime) load(ctx context.Context, id string) (loaded, error) {
	l, err := rt.loadOnce(ctx, id)
	var gap *fold.SequenceGapError
	if errors.As(err, &gap) {
		l, err = rt.loadOnce(ctx, id) // a newer compaction snapshot may be there now
	}
	if err != nil {
		return loaded{}, rt.compacted(ctx, id, -1, err)
	}
	return l, nil
}

func (rt *Runtime) loadOnce(ctx context.Context, id string) (loaded, error) {
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
		// The latest event names the flow: a ResumeAs onto another flow
		// writes every event after it under the target's id.
		l.workflowID = tail[len(tail)-1].WorkflowID
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
	l.state, err = foldTail(base, tail)
	return l, err
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
	st, err := foldTail(fold.Initial(), evs)
	return loaded{state: st, workflowID: evs[len(evs)-1].WorkflowID, eventsRead: len(evs)}, err
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
// travel): the snapshot at or below it plus the events up to it. An at past
// the end of the log returns the state at its end (State.Sequence says
// where that is); a negative at is refused. With an Authorizer it is a
// "query".
func (rt *Runtime) LoadStateAt(ctx context.Context, id string, at int64) (fold.State, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return fold.State{}, err
	}
	if at < 0 {
		return fold.State{}, fmt.Errorf("loom: state of %q at %d: a sequence is 0 or more", id, at)
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return fold.State{}, err
	}
	st, err := rt.loadStateAt(ctx, id, at)
	if err != nil {
		return fold.State{}, rt.compacted(ctx, id, at, err)
	}
	return st, nil
}

// loadStateAt is LoadStateAt's read: the snapshot at or below at, and the
// events after it up to at.
func (rt *Runtime) loadStateAt(ctx context.Context, id string, at int64) (fold.State, error) {
	base, from := fold.Initial(), int64(0)
	if rt.cfg.Snapshots != nil {
		snap, ok, err := rt.cfg.Snapshots.LoadAt(ctx, id, at)
		if err != nil {
			return fold.State{}, err
		}
		if ok {
			s, err := snapshot.Decode(snap.SchemaVersion, snap.State)
			if err == nil {
				base, from = s, snap.Sequence+1
			} else {
				rt.cfg.Logger.Warn("loom: snapshot ignored", "execution", id, "sequence", snap.Sequence, "error", err)
			}
		}
	}
	end := at + 1
	if at == math.MaxInt64 {
		end = at // ReadRange's end is exclusive; no log holds 2^63 events
	}
	evs, err := store.ReadRange(ctx, rt.cfg.Events, id, from, end)
	if err != nil {
		return fold.State{}, err
	}
	if from == 0 && len(evs) == 0 {
		return fold.State{}, fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	st, err := foldTail(base, evs)
	if err == nil && st.Sequence < at {
		// Short of at: the log's end, or events compaction moved out.
		if through := rt.trimPoint(ctx, id); through > st.Sequence {
			return fold.State{}, &CompactedHistoryError{ExecutionID: id, Through: through, At: at}
		}
	}
	return st, err
}

// foldTail folds the events read after st, refusing a gap with
// *fold.SequenceGapError (a cheap check, always on).
func foldTail(st fold.State, tail []event.Envelope) (fold.State, error) {
	return fold.FoldChecked(st, tail)
}

// FlowOf returns the id of the flow execution id runs: the flow its latest
// event names (after a ResumeAs onto another flow, that flow). It fails
// with ErrExecutionNotFound for an id with no log.
func (rt *Runtime) FlowOf(ctx context.Context, id string) (string, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return "", err
	}
	l, err := rt.load(ctx, id)
	if err != nil {
		return "", err
	}
	last, err := store.ReadRange(ctx, rt.cfg.Events, id, l.state.Sequence, l.state.Sequence+1)
	if err != nil {
		return "", err
	}
	if len(last) != 1 {
		return "", fmt.Errorf("%w: %q", ErrExecutionNotFound, id)
	}
	return last[0].WorkflowID, nil
}
