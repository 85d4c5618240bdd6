package postgres

import (
	"context"
	"errors"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ArchiveStore keeps the events compaction moved out of the logs of a DB,
// in the archive table (migration 10), and implements store.ArchiveStore.
//
// Archive is one transaction, durable before it returns: INSERT … ON
// CONFLICT DO NOTHING of the batch, then a read of the archived rows of its
// range, compared with the batch; a difference rolls everything back. The
// insert comes first so that an archiver racing it on the same sequences
// (in any process) has committed, or rolled back, before the comparison
// reads: two racing batches of one event each leave one row, and a racing
// different event is seen and refused. One from DB.ArchiveStore shares its
// DB, and Close only detaches it; one from OpenArchiveStore owns its DB,
// and Close closes it.
type ArchiveStore struct {
	view
}

var (
	_ store.ArchiveStore   = (*ArchiveStore)(nil)
	_ store.ArchiveDeleter = (*ArchiveStore)(nil)
)

// Archive implements store.ArchiveStore: the batch is checked by
// store.ValidateArchive under the DB's limits (*store.InvalidAppendError),
// then written in one transaction and compared with what the archive holds
// at its sequences (*store.ArchiveConflictError at the first that differs,
// by store.SameArchived). Either refusal writes nothing; a batch archived
// already writes nothing and returns nil.
func (s *ArchiveStore) Archive(ctx context.Context, executionID string, events []event.Envelope) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateArchive(executionID, events, s.db.opts.Limits); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	b, _, err := newAppendBatch(executionID, events[0].Sequence, unfenced, events)
	if err != nil {
		return err
	}
	err = inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, s.db.q.archiveInsert, executionID,
			b.sequences, b.ids, b.workflows, b.types, b.timestamps, b.payloads, b.metadata)
		if err != nil {
			return err
		}
		first, last := events[0].Sequence, events[len(events)-1].Sequence
		rows, err := tx.Query(ctx, s.db.q.archiveHeld, executionID, first, last)
		if err != nil {
			return err
		}
		held, err := scanEventRows(executionID, rows)
		if err != nil {
			return err
		}
		for _, prev := range held {
			if !store.SameArchived(prev, events[prev.Sequence-first]) {
				return &store.ArchiveConflictError{ExecutionID: executionID, Sequence: prev.Sequence}
			}
		}
		return nil
	})
	var ce *store.ArchiveConflictError
	if err != nil && !errors.As(err, &ce) {
		return s.readErr("archive events", err)
	}
	return err
}

// ReadArchived implements store.ArchiveStore: the archived events of
// executionID with from <= sequence < to (to < 0: to the end), in order,
// payloads and metadata as they were appended to the log.
func (s *ArchiveStore) ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if to < 0 {
		to = math.MaxInt64
	}
	if !pgText(executionID) || from >= to {
		return nil, nil // never stored
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.archiveRange, executionID, from, to)
	if err != nil {
		return nil, s.readErr("read archived events", err)
	}
	out, err := scanEventRows(executionID, rows)
	if err != nil {
		return nil, s.readErr("read archived events", err)
	}
	return out, nil
}

// Close detaches the store: later calls return store.ErrClosed. A store
// from OpenArchiveStore closes its DB; one from DB.ArchiveStore only
// detaches. A second Close returns nil.
func (s *ArchiveStore) Close() error { return s.close() }

// DeleteArchived implements store.ArchiveDeleter: one statement.
func (s *ArchiveStore) DeleteArchived(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !pgText(executionID) {
		return nil
	}
	if _, err := s.db.pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{s.db.opts.Schema}.Sanitize()+`.archive WHERE execution_id = $1::text`, executionID); err != nil {
		return s.readErr("delete archived events", err)
	}
	return nil
}
