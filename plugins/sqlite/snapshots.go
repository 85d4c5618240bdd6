package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// SnapshotStore keeps the checkpoints of a DB in the snapshots table. It
// implements store.SnapshotStore, store.SnapshotLister, store.SnapshotPruner
// and store.SnapshotDeleter. Writes go through the DB's writer (one
// transaction each, durable before they return); reads use the read pool.
// One from DB.SnapshotStore shares its DB, and Close only detaches it; one from
// OpenSnapshotStore owns its DB, and Close closes it.
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
// at the same sequence, durably before it returns. State is stored as given.
// A bad execution id or a negative sequence is refused with an
// *event.InvalidEnvelopeError and stores nothing.
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
	state := snap.State
	if state == nil {
		state = []byte{} // a BLOB, never NULL: LoadLatest returns a non-nil state
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(`INSERT INTO snapshots (execution_id, sequence, schema_version, state) VALUES (?, ?, ?, ?)
				ON CONFLICT (execution_id, sequence) DO UPDATE SET schema_version = excluded.schema_version, state = excluded.state`,
				snap.ExecutionID, snap.Sequence, snap.SchemaVersion, state)
			return err
		})
	})
}

// LoadLatest implements store.SnapshotStore: the snapshot of executionID
// with the highest sequence, or false when it has none.
func (s *SnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	if err := s.check(); err != nil {
		return store.Snapshot{}, false, err
	}
	return s.scan(executionID, s.db.reads.snapshotLatest.QueryRowContext(ctx, executionID))
}

// LoadAt implements store.SnapshotStore: the snapshot of executionID with
// the highest sequence <= atMost, or false when there is none.
func (s *SnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	if err := s.check(); err != nil {
		return store.Snapshot{}, false, err
	}
	return s.scan(executionID, s.db.reads.snapshotAt.QueryRowContext(ctx, executionID, atMost))
}

func (s *SnapshotStore) scan(executionID string, row *sql.Row) (store.Snapshot, bool, error) {
	snap := store.Snapshot{ExecutionID: executionID}
	err := row.Scan(&snap.Sequence, &snap.SchemaVersion, &snap.State)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Snapshot{}, false, nil
	}
	if err != nil {
		return store.Snapshot{}, false, s.db.readErr("load snapshot", err)
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
	rows, err := s.db.reads.snapshotSeqs.QueryContext(ctx, executionID)
	if err != nil {
		return nil, s.db.readErr("list snapshots", err)
	}
	var out []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, errors.Join(s.db.readErr("list snapshots", err), rows.Close())
		}
		out = append(out, seq)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.db.readErr("list snapshots", err)
	}
	return out, nil
}

// Prune implements store.SnapshotPruner: it deletes the snapshots of
// executionID with sequence < below in one transaction and returns how many
// it deleted.
func (s *SnapshotStore) Prune(ctx context.Context, executionID string, below int64) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() (err error) {
			n, err = c.exec(`DELETE FROM snapshots WHERE execution_id = ? AND sequence < ?`, executionID, below)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeleteExecution implements store.SnapshotDeleter: it removes every
// snapshot of executionID; an unknown execution is not an error.
func (s *SnapshotStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(`DELETE FROM snapshots WHERE execution_id = ?`, executionID)
			return err
		})
	})
}

// Close implements store.SnapshotStore: later calls return store.ErrClosed.
// A store from OpenSnapshotStore closes its DB; one from DB.SnapshotStore
// only detaches. A second Close returns nil.
func (s *SnapshotStore) Close() error { return s.close() }
