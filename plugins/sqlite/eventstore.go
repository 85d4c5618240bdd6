package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Listing bounds: ListExecutions reads at most MaxListPage executions per
// call (a larger limit is cut to it, and Next carries on from there) and
// DefaultListPage when the limit is below 1.
const (
	MaxListPage     = 10_000
	DefaultListPage = 1000
)

// EventStore is the event log of a DB. It implements store.EventStore and
// every optional capability: store.RangeReader, store.Subscriber,
// store.PrefixCopier, store.ExecutionDeleter, store.Fencer,
// store.StatusIndex and store.ExecutionCatalog (both kept in the
// transaction of each write they index) and store.PrefixTrimmer (see
// TrimThrough).
//
// Appends go through the DB's group-commit writer: an Append returns only
// after the transaction holding its events has committed (and, under
// SyncFull, been fsynced), and concurrent Appends share that transaction.
// A crash before the commit leaves none of a batch's events; after it, all.
// One from DB.EventStore shares its DB, and Close only detaches it; one from
// OpenEventStore owns its DB, and Close closes it.
type EventStore struct {
	view
}

var (
	_ store.EventStore       = (*EventStore)(nil)
	_ store.RangeReader      = (*EventStore)(nil)
	_ store.Subscriber       = (*EventStore)(nil)
	_ store.PrefixCopier     = (*EventStore)(nil)
	_ store.ExecutionDeleter = (*EventStore)(nil)
	_ store.Fencer           = (*EventStore)(nil)
	_ store.StatusIndex      = (*EventStore)(nil)
	_ store.ExecutionCatalog = (*EventStore)(nil)
	_ store.PrefixTrimmer    = (*EventStore)(nil)
)

// Append implements store.EventStore. The batch is checked by
// store.ValidateAppend in the caller (*store.InvalidAppendError), then
// queued for group commit; inside the transaction the log's length is
// compared with expected (*store.SequenceConflictError). Either refusal
// writes nothing, the status index and the catalog included, and affects
// no other caller's batch; an accepted batch that moves the status changes
// both in its own transaction (see ListUnfinished, SearchExecutions).
// Append returns nil only once the transaction holding the batch has
// committed (fsynced under SyncFull). If ctx ends while the batch is still queued, Append returns
// ctx.Err() and nothing is written; once a leader has taken the batch,
// Append waits for the commit's outcome. The caller may be the leader that
// commits others' batches too, for at most a few transactions after its own.
func (s *EventStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, false, 0, expected, events)
}

// AppendFenced implements store.Fencer: Append that, inside the same
// transaction, first refuses with *store.FencedError when a token newer than
// token has been acquired for executionID.
func (s *EventStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, true, token, expected, events)
}

func (s *EventStore) append(ctx context.Context, executionID string, fenced bool, token, expected int64, events []event.Envelope) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateAppend(executionID, expected, events, s.db.opts.limits); err != nil {
		return err
	}
	b, size := newAppendBatch(executionID, expected, events)
	b.fenced, b.token = fenced, token
	return s.db.w.submit(ctx, b, size)
}

// ReadFrom implements store.EventStore: the events of executionID with
// sequence >= from, in order, as committed when the read starts; payloads
// and metadata values are the bytes appended.
func (s *EventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.db.reads.eventsFrom.QueryContext(ctx, executionID, from)
	if err != nil {
		return nil, s.db.readErr("read events", err)
	}
	return s.scanEvents(executionID, rows)
}

// ReadRange implements store.RangeReader: the events with
// from <= sequence < to, in order.
func (s *EventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.db.reads.eventsRange.QueryContext(ctx, executionID, from, to)
	if err != nil {
		return nil, s.db.readErr("read events", err)
	}
	return s.scanEvents(executionID, rows)
}

// scanEvents reads rows of eventCols and closes them.
func (s *EventStore) scanEvents(executionID string, rows *sql.Rows) ([]event.Envelope, error) {
	return scanEventRows(s.db, executionID, rows)
}

// scanEventRows reads rows of eventCols of executionID, from the events or
// the archive table, and closes them.
func scanEventRows(db *DB, executionID string, rows *sql.Rows) (out []event.Envelope, err error) {
	defer func() {
		if cerr := rows.Close(); cerr != nil && err == nil {
			out, err = nil, db.readErr("read events", cerr)
		}
	}()
	for rows.Next() {
		e := event.Envelope{ExecutionID: executionID}
		var payload []byte
		var meta sql.NullString
		if err := rows.Scan(&e.Sequence, &e.ID, &e.WorkflowID, &e.Type, &e.Timestamp, &payload, &meta); err != nil {
			return nil, db.readErr("read events", err)
		}
		e.Payload = json.RawMessage(payload)
		if meta.Valid {
			if e.Metadata, err = decodeMetadata(meta.String); err != nil {
				return nil, err
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, db.readErr("read events", err)
	}
	return out, nil
}

// ListExecutions implements store.EventStore: up to limit executions (at
// most MaxListPage) whose id sorts after after in code-point order, which
// is SQLite's BINARY collation of UTF-8 text; a limit below 1 means
// DefaultListPage. Next is the last id of the page when more follow, ""
// otherwise. Deleted executions are not listed.
func (s *EventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := s.check(); err != nil {
		return store.ExecutionPage{}, err
	}
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	rows, err := s.db.reads.executions.QueryContext(ctx, after, limit+1)
	if err != nil {
		return store.ExecutionPage{}, s.db.readErr("list executions", err)
	}
	var page store.ExecutionPage
	for rows.Next() {
		var info store.ExecutionInfo
		if err := rows.Scan(&info.ExecutionID, &info.WorkflowID, &info.Length); err != nil {
			return store.ExecutionPage{}, errors.Join(s.db.readErr("list executions", err), rows.Close())
		}
		page.Executions = append(page.Executions, info)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return store.ExecutionPage{}, s.db.readErr("list executions", err)
	}
	if len(page.Executions) > limit {
		page.Executions = page.Executions[:limit]
		page.Next = page.Executions[limit-1].ExecutionID
	}
	return page, nil
}

// Close implements store.EventStore: later calls return store.ErrClosed and
// open subscriptions end with it. A store from OpenEventStore closes its DB
// (waiting for queued appends to commit); one from DB.EventStore only
// detaches and leaves the DB open. A second Close returns nil.
func (s *EventStore) Close() error { return s.close() }

// Subscribe implements store.Subscriber: it delivers the events of
// executionID from from on, first those stored, then each new one once
// committed — whoever appended it. An append through this DB (any of its
// views) wakes the subscription as soon as its commit returns. An append
// by another connection to the same file — another DB in this process or
// another process — is seen through the DB's one poller of PRAGMA
// data_version, every ChangePollInterval (50 ms) while any subscription of
// the DB is open, so it arrives within about that interval; on each change
// the poller sees, every open subscription re-reads its log once (one
// indexed read). The subscription ends when ctx ends or it is closed (Err
// nil), or when s or its DB is closed (Err store.ErrClosed).
func (s *EventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if from < 0 {
		from = 0
	}
	unfollow, err := s.db.changes.follow()
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context, next int64) ([]event.Envelope, error) {
		return s.ReadFrom(ctx, executionID, next)
	}
	wait := func() <-chan struct{} { return s.db.wake.Wait(executionID) }
	sub := store.Follow(ctx, read, wait, from)
	go func() {
		_ = sub.Err() // returns once the subscription has ended, for any reason
		unfollow()
	}()
	return sub, nil
}
