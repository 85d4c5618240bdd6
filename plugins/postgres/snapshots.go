package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// SnapshotStore keeps the checkpoints of a DB in the snapshots table. It
// implements store.SnapshotStore, store.SnapshotLister, store.SnapshotPruner
// and store.SnapshotDeleter. Every write is one statement in its own
// transaction, durable before it returns; State is bytea, stored and
// returned byte for byte. One from DB.SnapshotStore shares its DB, and Close
// only detaches it; one from OpenSnapshotStore owns its DB, and Close
// closes it.
type SnapshotStore struct {
	view
}

var (
	_ store.SnapshotStore   = (*SnapshotStore)(nil)
	_ store.SnapshotLister  = (*SnapshotStore)(nil)
	_ store.SnapshotPruner  = (*SnapshotStore)(nil)
	_ store.SnapshotDeleter = (*SnapshotStore)(nil)
)

// Save implements store.SnapshotStore: it stores snap, replacing a snapshot
// at the same sequence (an upsert, so two nodes saving the same sequence at
// once leave one of them), durably before it returns. A bad execution id or
// a negative sequence is refused with an *event.InvalidEnvelopeError and
// stores nothing.
func (s *SnapshotStore) Save(ctx context.Context, snap store.Snapshot) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := event.ValidateID("executionId", snap.ExecutionID); err != nil {
		return err
	}
	if snap.Sequence < 0 {
		return &event.InvalidEnvelopeError{Field: "sequence", Reason: "negative"}
	}
	if !pgText(snap.SchemaVersion) {
		return &event.InvalidEnvelopeError{Field: "schemaVersion", Reason: "not valid UTF-8 or holds NUL"}
	}
	state := snap.State
	if state == nil {
		state = []byte{} // bytea NOT NULL: a load returns a non-nil state
	}
	_, err := s.db.pool.Exec(ctx, s.db.q.snapshotSave, snap.ExecutionID, snap.Sequence, snap.SchemaVersion, state)
	if err != nil {
		return s.readErr("save snapshot", err)
	}
	return nil
}

// LoadLatest implements store.SnapshotStore: the snapshot of executionID
// with the highest sequence, or false when it has none.
func (s *SnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	if err := s.check(); err != nil {
		return store.Snapshot{}, false, err
	}
	if !pgText(executionID) {
		return store.Snapshot{}, false, nil
	}
	return s.scan(executionID, s.db.pool.QueryRow(ctx, s.db.q.snapshotLatest, executionID))
}

// LoadAt implements store.SnapshotStore: the snapshot of executionID with
// the highest sequence <= atMost, or false when there is none.
func (s *SnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	if err := s.check(); err != nil {
		return store.Snapshot{}, false, err
	}
	if !pgText(executionID) {
		return store.Snapshot{}, false, nil
	}
	return s.scan(executionID, s.db.pool.QueryRow(ctx, s.db.q.snapshotAt, executionID, atMost))
}

func (s *SnapshotStore) scan(executionID string, row pgx.Row) (store.Snapshot, bool, error) {
	snap := store.Snapshot{ExecutionID: executionID}
	err := row.Scan(&snap.Sequence, &snap.SchemaVersion, &snap.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Snapshot{}, false, nil
	}
	if err != nil {
		return store.Snapshot{}, false, s.readErr("load snapshot", err)
	}
	if snap.State == nil {
		snap.State = []byte{}
	}
	return snap, true, nil
}

// ListSequences implements store.SnapshotLister: the stored sequences of
// executionID, ascending (none for an unknown execution).
func (s *SnapshotStore) ListSequences(ctx context.Context, executionID string) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !pgText(executionID) {
		return nil, nil
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.snapshotSeqs, executionID)
	if err != nil {
		return nil, s.readErr("list snapshots", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.readErr("list snapshots", err)
	}
	return out, nil
}

// Prune implements store.SnapshotPruner: it deletes the snapshots of
// executionID with sequence < below in one statement and returns how many
// it deleted.
func (s *SnapshotStore) Prune(ctx context.Context, executionID string, below int64) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if !pgText(executionID) {
		return 0, nil
	}
	tag, err := s.db.pool.Exec(ctx, s.db.q.snapshotPrune, executionID, below)
	if err != nil {
		return 0, s.readErr("prune snapshots", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteExecution implements store.SnapshotDeleter: it removes every
// snapshot of executionID; an unknown execution is not an error.
func (s *SnapshotStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !pgText(executionID) {
		return nil
	}
	if _, err := s.db.pool.Exec(ctx, s.db.q.snapshotDelete, executionID); err != nil {
		return s.readErr("delete snapshots", err)
	}
	return nil
}

// Close implements store.SnapshotStore: later calls return store.ErrClosed.
// A store from OpenSnapshotStore closes its DB; one from DB.SnapshotStore
// only detaches. A second Close returns nil.
func (s *SnapshotStore) Close() error { return s.close() }
