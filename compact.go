package loom

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

// Compaction: an execution's settled history moves out of its log into
// Config.Archive, and a snapshot at the compaction point stands for it.
// The log keeps its start event (#0, the execution's birth record: flow,
// tenant, trace, pins) and everything after the point; a load folds the
// snapshot and that tail, exactly as before (fold(snapshot, tail) equals
// the fold of every event, archived ones included). Replay, resume and
// reads never look at the archive; ReadArchived is the audit read.

// CompactResult says what Compact did.
type CompactResult struct {
	ExecutionID string `json:"executionId"`
	// Through is the log's compaction point after the call: events
	// 1..Through are in the archive, not the log.
	Through int64 `json:"through"`
	// Archived is the number of events this call moved (0 when the log was
	// already compacted that far).
	Archived int `json:"archived"`
}

// CompactError refuses a Compact; nothing was changed.
type CompactError struct {
	ExecutionID string
	Through     int64
	Reason      string
}

func (e *CompactError) Error() string {
	return "loom: cannot compact " + strconv.Quote(e.ExecutionID) + " through #" + strconv.FormatInt(e.Through, 10) + ": " + e.Reason
}

// CompactedHistoryError refuses a read that needs events compaction moved
// out of the log: a state (or a fork) at a sequence inside the compacted
// range with no snapshot exactly there, or a load whose compaction
// snapshot does not load. Nothing was changed. ReadArchived reads the
// archived events.
type CompactedHistoryError struct {
	ExecutionID string
	// Through is the log's compaction point; At the sequence asked for (-1
	// for the current state).
	Through, At int64
}

func (e *CompactedHistoryError) Error() string {
	if e.At < 0 {
		return "loom: execution " + strconv.Quote(e.ExecutionID) + " is compacted through #" + strconv.FormatInt(e.Through, 10) +
			" and its compaction snapshot does not load: restore the snapshot store, or read the history with ReadArchived"
	}
	return "loom: execution " + strconv.Quote(e.ExecutionID) + " is compacted through #" + strconv.FormatInt(e.Through, 10) +
		" and has no snapshot at #" + strconv.FormatInt(e.At, 10) + ": pick a sequence after #" + strconv.FormatInt(e.Through, 10) +
		" or one with a snapshot, or read the archived events with ReadArchived"
}

// Compact moves the events 1..through of execution id into Config.Archive
// and drops them from its log, after saving a snapshot at through, so the
// execution loads, resumes and replays as before. The start event and the
// last event always stay. The events reach the archive as the store
// beneath any wrapper holds them (store.ArchiveRange), so Config.Archive
// wraps the archive as Config.Events wraps the log (docs/lifecycle.md). It
// is idempotent and resumable: each write (archive, snapshot, trim) can be
// repeated, so a compaction a crash
// interrupted is finished by running it again, and nothing is lost or left
// in both places once it returns. A through at or below the current
// compaction point changes nothing.
//
// It needs Config.Archive, Config.Snapshots and an event store that is a
// store.PrefixTrimmer (*NotConfiguredError otherwise), and refuses a
// through below 1, at the log's last event or past it with *CompactError
// — appending, archiving and trimming nothing; so is an archive that is
// not the event store wrapper's own (*store.ArchiveLayerError). With an
// Authorizer it is a "compact".
func (rt *Runtime) Compact(ctx context.Context, id string, through int64) (CompactResult, error) {
	res := CompactResult{ExecutionID: id}
	if err := event.ValidateID("execution id", id); err != nil {
		return res, err
	}
	trimmer, ok := rt.cfg.Events.(store.PrefixTrimmer)
	switch {
	case rt.cfg.Archive == nil:
		return res, &NotConfiguredError{Field: "Archive", Need: "Compact"}
	case rt.cfg.Snapshots == nil:
		return res, &NotConfiguredError{Field: "Snapshots", Need: "Compact (the snapshot at the compaction point)"}
	case !ok:
		return res, &NotConfiguredError{Field: "Events", Need: "Compact (an event store that is a store.PrefixTrimmer)"}
	}
	if err := rt.authorize(ctx, "compact", id, "", true); err != nil {
		return res, err
	}
	current, err := rt.load(ctx, id)
	if err != nil {
		return res, err
	}
	last := current.state.Sequence
	trimmed, err := trimmer.TrimmedThrough(ctx, id)
	if err != nil {
		return res, err
	}
	res.Through = trimmed
	switch {
	case through < 1:
		return res, &CompactError{ExecutionID: id, Through: through, Reason: "the start event (#0) always stays: compact through #1 or later"}
	case through >= last:
		return res, &CompactError{ExecutionID: id, Through: through,
			Reason: "the log's last event is #" + strconv.FormatInt(last, 10) + " and it always stays: compact through an earlier one"}
	case through <= trimmed:
		return res, nil
	}
	// The state at through, which the snapshot will hold (nothing written yet).
	at, err := rt.stateAt(ctx, id, through)
	if err != nil {
		return res, err
	}
	b, err := snapshot.Encode(at)
	if err != nil {
		return res, err
	}
	// 1. The events, into the archive (idempotent: a crash before the trim
	// leaves them in both places, identical, until the next Compact), as
	// the store beneath any wrapper holds them (store.PrefixArchiver).
	n, err := store.ArchiveRange(ctx, rt.cfg.Events, rt.cfg.Archive, id, trimmed+1, through)
	if err != nil {
		return res, fmt.Errorf("loom: compacting %q: archiving #%d..#%d: %w", id, trimmed+1, through, err)
	}
	if int64(n) != through-trimmed {
		return res, fmt.Errorf("loom: compacting %q: the log holds %d of the events #%d..#%d", id, n, trimmed+1, through)
	}
	// 2. The snapshot that stands for the history.
	if err := rt.cfg.Snapshots.Save(ctx, store.Snapshot{ExecutionID: id, Sequence: through, SchemaVersion: event.SchemaVersion, State: b}); err != nil {
		return res, fmt.Errorf("loom: compacting %q: saving the snapshot at #%d: %w", id, through, err)
	}
	// 3. Out of the log.
	if err := trimmer.TrimThrough(ctx, id, through); err != nil {
		return res, fmt.Errorf("loom: compacting %q: trimming the log through #%d: %w", id, through, err)
	}
	res.Through, res.Archived = through, n
	return res, nil
}

// stateAt is LoadStateAt without the authorization (the caller did it).
func (rt *Runtime) stateAt(ctx context.Context, id string, at int64) (fold.State, error) {
	st, err := rt.loadStateAt(ctx, id, at)
	if err != nil {
		return fold.State{}, rt.compacted(ctx, id, at, err)
	}
	if st.Sequence != at {
		return fold.State{}, fmt.Errorf("loom: state of %q at #%d: the log ends at #%d", id, at, st.Sequence)
	}
	return st, nil
}

// ReadArchived returns the events of execution id that Compact moved into
// Config.Archive with from <= sequence < to (to < 0: all after from), in
// order: the audit read of compacted history. It needs Config.Archive.
// With an Authorizer it is a "query".
func (rt *Runtime) ReadArchived(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return nil, err
	}
	if rt.cfg.Archive == nil {
		return nil, &NotConfiguredError{Field: "Archive", Need: "ReadArchived"}
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return nil, err
	}
	return rt.cfg.Archive.ReadArchived(ctx, id, from, to)
}

// compacted turns a gap in a log read at a compacted execution into a
// *CompactedHistoryError naming the compaction point; any other error is
// returned as it is.
func (rt *Runtime) compacted(ctx context.Context, id string, at int64, err error) error {
	var gap *fold.SequenceGapError
	if !errors.As(err, &gap) {
		return err
	}
	through := rt.trimPoint(ctx, id)
	if through == 0 {
		return err
	}
	return &CompactedHistoryError{ExecutionID: id, Through: through, At: at}
}

// trimPoint is the log's compaction point, 0 when it has none (or the
// store cannot say).
func (rt *Runtime) trimPoint(ctx context.Context, id string) int64 {
	trimmer, ok := rt.cfg.Events.(store.PrefixTrimmer)
	if !ok {
		return 0
	}
	through, err := trimmer.TrimmedThrough(ctx, id)
	if err != nil {
		return 0
	}
	return through
}

// TrimInbox moves the messages an execution's chain has consumed out of
// its inbox streams into Config.Archive: a consumed message is recorded in
// the execution's own log (MESSAGE_CONSUMED carries it), so replay never
// reads it from the stream again. A stream's first and last messages
// stay, as in Compact. It returns how many messages it moved; it is
// idempotent, and needs what Compact needs. A fork made later copies its
// parent's streams with their trim point; one whose fork point consumed
// fewer messages than were trimmed is refused. With an Authorizer it is a
// "compact".
func (rt *Runtime) TrimInbox(ctx context.Context, id string) (int, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return 0, err
	}
	trimmer, ok := rt.cfg.Events.(store.PrefixTrimmer)
	switch {
	case rt.cfg.Archive == nil:
		return 0, &NotConfiguredError{Field: "Archive", Need: "TrimInbox"}
	case !ok:
		return 0, &NotConfiguredError{Field: "Events", Need: "TrimInbox (an event store that is a store.PrefixTrimmer)"}
	}
	if err := rt.authorize(ctx, "compact", id, "", true); err != nil {
		return 0, err
	}
	return rt.trimInbox(ctx, trimmer, id, false)
}

// trimInbox is TrimInbox's work; with dryRun it only counts.
func (rt *Runtime) trimInbox(ctx context.Context, trimmer store.PrefixTrimmer, id string, dryRun bool) (int, error) {
	// The chain's live head holds the cursors furthest along.
	head, st := id, fold.State{}
	for hops := 0; ; hops++ {
		l, err := rt.load(ctx, head)
		if err != nil {
			return 0, err
		}
		st = l.state
		if st.Status != fold.StatusContinued || st.Variables.ContinuedTo == "" || hops >= maxChainHops {
			break
		}
		head = st.Variables.ContinuedTo
	}
	chain := chainOf(head, st)
	moved := 0
	for _, topic := range slices.Sorted(maps.Keys(st.Variables.Inbox)) {
		n := st.Variables.Inbox[topic].Consumed
		stream := streamID(chain, topic)
		through := n - 1 // messages 0..n-1 are consumed
		more, err := store.ReadRange(ctx, rt.cfg.Events, stream, n, n+1)
		if err != nil {
			return moved, err
		}
		if len(more) == 0 {
			through = n - 2 // the stream's last message stays
		}
		trimmed, err := trimmer.TrimmedThrough(ctx, stream)
		if err != nil {
			return moved, err
		}
		if through < 1 || through <= trimmed {
			continue
		}
		if dryRun {
			moved += int(through - trimmed)
			continue
		}
		k, err := store.ArchiveRange(ctx, rt.cfg.Events, rt.cfg.Archive, stream, trimmed+1, through)
		if err != nil {
			return moved, fmt.Errorf("loom: trimming the inbox of %q: archiving %s: %w", id, topic, err)
		}
		if int64(k) != through-trimmed {
			return moved, fmt.Errorf("loom: trimming the inbox of %q: the stream %s holds %d of the messages #%d..#%d", id, topic, k, trimmed+1, through)
		}
		if err := trimmer.TrimThrough(ctx, stream, through); err != nil {
			return moved, fmt.Errorf("loom: trimming the inbox of %q: %s: %w", id, topic, err)
		}
		moved += k
	}
	return moved, nil
}
