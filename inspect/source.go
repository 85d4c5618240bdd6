package inspect

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

// Source is the storage a lens reads: an event log, and optionally its
// snapshots (so a state is the nearest checkpoint plus a short tail) and its
// branch refs. Nothing here writes.
type Source struct {
	// Events is the log. Required.
	Events store.EventStore
	// Snapshots, when set, shortens folds; a snapshot that does not decode
	// or is ahead of the log is ignored, since the log is authoritative.
	Snapshots store.SnapshotStore
	// Branches, when set, lists branch refs.
	Branches store.BranchRegistry
	// Follow delivers an execution's events from a sequence on as its log
	// grows. Default: the Events store's own store.Subscriber (the SQLite
	// and PostgreSQL stores' subscriptions see other processes' appends).
	// PollingFollow serves a store without a Subscriber.
	Follow FollowFunc
}

// FollowFunc follows a log from a sequence on (a store.Subscriber's
// Subscribe, or PollingFollow).
type FollowFunc func(ctx context.Context, executionID string, from int64) (*store.Subscription, error)

// SequenceError reports a sequence past the end of an execution's log.
type SequenceError struct {
	ExecutionID string
	At, Last    int64
}

func (e *SequenceError) Error() string {
	return "inspect: " + strconv.Quote(e.ExecutionID) + " has no event #" + strconv.FormatInt(e.At, 10) +
		": its log ends at #" + strconv.FormatInt(e.Last, 10)
}

// StateAt returns the folded state of an execution after the event at
// sequence at, or its latest state when at is negative: the latest snapshot
// at or below at, decoded with snapshot.Decode, plus the log from there — the
// same fold the runtime does. It returns an error matching
// loom.ErrExecutionNotFound for an execution with no log, and a
// *SequenceError for an at past its end.
func (s Source) StateAt(ctx context.Context, id string, at int64) (fold.State, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return fold.State{}, err
	}
	base, from := fold.Initial(), int64(0)
	if s.Snapshots != nil {
		var (
			snap store.Snapshot
			ok   bool
			err  error
		)
		if at < 0 {
			snap, ok, err = s.Snapshots.LoadLatest(ctx, id)
		} else {
			snap, ok, err = s.Snapshots.LoadAt(ctx, id, at)
		}
		if err != nil {
			return fold.State{}, err
		}
		if ok {
			if st, err := snapshot.Decode(snap.SchemaVersion, snap.State); err == nil {
				base, from = st, snap.Sequence+1
			}
		}
	}
	tail, err := s.read(ctx, id, from, at)
	if err != nil {
		return fold.State{}, err
	}
	if from > 0 && len(tail) == 0 {
		// A snapshot must never be ahead of the log it summarizes.
		have, err := store.ReadRange(ctx, s.Events, id, from-1, from)
		if err != nil {
			return fold.State{}, err
		}
		if len(have) != 1 && !compactedAt(ctx, s.Events, id, from-1) {
			base, from = fold.Initial(), 0
			if tail, err = s.read(ctx, id, 0, at); err != nil {
				return fold.State{}, err
			}
		}
	}
	if from == 0 && len(tail) == 0 {
		return fold.State{}, fmt.Errorf("%w: %q", loom.ErrExecutionNotFound, id)
	}
	// Checked: a log with a hole (events compaction moved into the
	// archive, with no snapshot standing for them here) is refused, never
	// folded into a state nobody recorded.
	st, err := fold.FoldChecked(base, tail)
	if err != nil {
		return fold.State{}, fmt.Errorf("inspect: %q: %w (a compacted execution is read with its compaction snapshot)", id, err)
	}
	if at >= 0 && st.Sequence < at {
		return fold.State{}, &SequenceError{ExecutionID: id, At: at, Last: st.Sequence}
	}
	return st, nil
}

func (s Source) read(ctx context.Context, id string, from, at int64) ([]event.Envelope, error) {
	if at < 0 {
		return s.Events.ReadFrom(ctx, id, from)
	}
	if at == math.MaxInt64 {
		return s.Events.ReadFrom(ctx, id, from) // at+1 would overflow; no log is that long
	}
	return store.ReadRange(ctx, s.Events, id, from, at+1)
}

// follow returns the Follow to use, or nil when the store cannot follow.
func (s Source) follow() FollowFunc {
	if s.Follow != nil {
		return s.Follow
	}
	if sub, ok := s.Events.(store.Subscriber); ok {
		return sub.Subscribe
	}
	return nil
}

// PollingFollow follows logs by re-reading them: catch-up first, then one
// read every interval (at least 10 ms), delivering what was appended since.
// It sees appends from any process, which a SQLite store's own
// subscriptions do not, at the cost of one indexed read per interval per
// follower and up to one interval of delay.
func PollingFollow(events store.EventStore, interval time.Duration) FollowFunc {
	interval = max(interval, 10*time.Millisecond)
	return func(ctx context.Context, id string, from int64) (*store.Subscription, error) {
		if err := event.ValidateID("execution id", id); err != nil {
			return nil, err
		}
		read := func(ctx context.Context, from int64) ([]event.Envelope, error) {
			return events.ReadFrom(ctx, id, from)
		}
		tick := func() <-chan struct{} {
			ch := make(chan struct{})
			time.AfterFunc(interval, func() { close(ch) })
			return ch
		}
		return store.Follow(ctx, read, tick, max(from, 0)), nil
	}
}

// compactedAt says the event at seq was moved out of id's log by
// compaction (a snapshot there stands for it, and is no snapshot ahead of
// its log).
func compactedAt(ctx context.Context, events store.EventStore, id string, seq int64) bool {
	tr, ok := events.(store.PrefixTrimmer)
	if !ok {
		return false
	}
	through, err := tr.TrimmedThrough(ctx, id)
	return err == nil && seq >= 1 && seq <= through
}
