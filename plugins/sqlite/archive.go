package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ArchiveStore keeps the events compaction moved out of the logs of a DB,
// in the archive table (migration 9), and implements store.ArchiveStore.
//
// Archive is one write transaction on the DB's writer, durable before it
// returns: it reads the rows already archived in the batch's range,
// refuses the batch if one of them is another event, and inserts the rest
// with INSERT … ON CONFLICT DO NOTHING. A crash before the commit leaves
// none of the batch; after it, all. Reads go to the read pool. One from
// DB.ArchiveStore shares its DB, and Close only detaches it; one from
// OpenArchiveStore owns its DB, and Close closes it.
type ArchiveStore struct {
	view
}

var (
	_ store.ArchiveStore   = (*ArchiveStore)(nil)
	_ store.ArchiveDeleter = (*ArchiveStore)(nil)
)

// Archive statements.
var (
	sqlArchived = `SELECT ` + eventCols + ` FROM archive
		WHERE execution_id = ? AND sequence >= ? AND sequence <= ? ORDER BY sequence`
	archiveSQL = multiRowSQL(`INSERT INTO archive (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata) VALUES `,
		` ON CONFLICT (execution_id, sequence) DO NOTHING`)
)

// sqlArchiveRange reads the archive of an execution with
// from <= sequence < to, on the read pool.
const sqlArchiveRange = `SELECT ` + eventCols + ` FROM archive
	WHERE execution_id = ? AND sequence >= ? AND sequence < ? ORDER BY sequence`

// Archive implements store.ArchiveStore: the batch is checked by
// store.ValidateArchive under the DB's limits (*store.InvalidAppendError),
// then, in one transaction, compared with what is archived at its
// sequences (*store.ArchiveConflictError at the first that differs, by
// store.SameArchived) and inserted where nothing is. Either refusal
// writes nothing; a batch archived already writes nothing and returns nil.
func (s *ArchiveStore) Archive(ctx context.Context, executionID string, events []event.Envelope) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateArchive(executionID, events, s.db.opts.limits); err != nil {
		return err
	}
	if len(events) == 0 {
		return nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		rows[i], _ = appendEventValues(make([]any, 0, eventColumns), executionID, e)
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			if err := checkArchived(c, executionID, events); err != nil {
				return err
			}
			return insertRows(c, archiveSQL, rows)
		})
	})
}

// checkArchived refuses events if the archive holds another event at one
// of their sequences, reading the archived rows of their range inside the
// open transaction.
func checkArchived(c *rawConn, executionID string, events []event.Envelope) error {
	first, last := events[0].Sequence, events[len(events)-1].Sequence
	var held []event.Envelope
	err := eachRow(c, func(row []driver.Value) (bool, error) {
		e, err := rowEnvelope(executionID, row)
		held = append(held, e)
		return true, err
	}, sqlArchived, executionID, first, last)
	if err != nil {
		return err
	}
	for _, prev := range held {
		if !store.SameArchived(prev, events[prev.Sequence-first]) {
			return &store.ArchiveConflictError{ExecutionID: executionID, Sequence: prev.Sequence}
		}
	}
	return nil
}

// rowEnvelope decodes a row of eventCols read on the write connection.
func rowEnvelope(executionID string, row []driver.Value) (event.Envelope, error) {
	e := event.Envelope{ExecutionID: executionID}
	var ok [6]bool
	var payload string
	e.Sequence, ok[0] = row[0].(int64)
	e.ID, ok[1] = row[1].(string)
	e.WorkflowID, ok[2] = row[2].(string)
	e.Type, ok[3] = row[3].(string)
	e.Timestamp, ok[4] = row[4].(int64)
	payload, ok[5] = row[5].(string)
	if ok != [6]bool{true, true, true, true, true, true} {
		return e, fmt.Errorf("sqlite: event row of types %T %T %T %T %T %T", row[0], row[1], row[2], row[3], row[4], row[5])
	}
	e.Payload = json.RawMessage(payload)
	if meta, isText := row[6].(string); isText {
		m, err := decodeMetadata(meta)
		if err != nil {
			return e, err
		}
		e.Metadata = m
	}
	return e, nil
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
	rows, err := s.db.reads.archiveRange.QueryContext(ctx, executionID, from, to)
	if err != nil {
		return nil, s.db.readErr("read archived events", err)
	}
	return scanEventRows(s.db, executionID, rows)
}

// Close detaches the store: later calls return store.ErrClosed. A store
// from OpenArchiveStore closes its DB; one from DB.ArchiveStore only
// detaches. A second Close returns nil.
func (s *ArchiveStore) Close() error { return s.close() }

// DeleteArchived implements store.ArchiveDeleter: one write transaction
// on the DB's writer.
func (s *ArchiveStore) DeleteArchived(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(`DELETE FROM archive WHERE execution_id = ?`, executionID)
			return err
		})
	})
}

// OpenArchiveStore is OpenEventStore for an ArchiveStore that owns its
// database file.
func OpenArchiveStore(path string, opts ...Option) (*ArchiveStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &ArchiveStore{view: view{db: db, owned: true}}, nil
}
