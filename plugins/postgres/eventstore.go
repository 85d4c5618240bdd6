package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

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
// store.StatusIndex and store.ExecutionCatalog (both kept by the append
// statement itself) and store.PrefixTrimmer (see TrimThrough).
//
// Appends go through the DB's group-commit writer: an Append returns only
// after the transaction holding its events has committed (durable, with
// the server's synchronous_commit on), and concurrent Appends share that
// transaction. A crash before the commit leaves none of a batch's events;
// after it, all. Any number of processes may append to one schema: the
// expected-length check and the fence are conditions of the append
// statement itself, under the execution row's lock. One from DB.EventStore
// shares its DB, and Close only detaches it; one from OpenEventStore owns
// its DB, and Close closes it.
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
// queued for group commit; the append statement writes it iff the log
// holds exactly expected events (*store.SequenceConflictError otherwise,
// with the length read after the refusal). Either refusal writes nothing,
// the status index and the catalog included, and affects no other
// caller's batch; an accepted batch that moves the status changes both in
// the same statement (see ListUnfinished, SearchExecutions). Append returns nil only once the
// transaction holding the batch has committed. If ctx ends while the batch
// is still queued, Append returns ctx.Err() and nothing is written; once a
// leader has taken it, Append waits for the outcome. If the connection
// fails while the commit is in doubt, the error matches ErrOutcomeUnknown:
// read the log to learn whether the batch landed.
func (s *EventStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, unfenced, expected, events)
}

// AppendFenced implements store.Fencer: Append whose statement also
// requires that no token newer than token has been acquired for
// executionID, refusing with *store.FencedError otherwise (checked before
// the length, and writing nothing). The fence and the length are checked
// under the same row lock that AcquireFence takes, so once AcquireFence has
// returned a newer token, no append under an older one can commit.
func (s *EventStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	return s.append(ctx, executionID, token, expected, events)
}

func (s *EventStore) append(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateAppend(executionID, expected, events, s.db.opts.Limits); err != nil {
		return err
	}
	b, size, err := newAppendBatch(executionID, expected, token, events)
	if err != nil {
		return err
	}
	return s.db.w.submit(ctx, b, size)
}

// ReadFrom implements store.EventStore: the events of executionID with
// sequence >= from, in order, as committed when the read starts; payloads
// and metadata values are the bytes appended.
func (s *EventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !pgText(executionID) {
		return nil, nil // never stored: Append refuses such ids
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.eventsFrom, executionID, from)
	if err != nil {
		return nil, s.readErr("read events", err)
	}
	return s.scanEvents(executionID, rows)
}

// ReadRange implements store.RangeReader: the events with
// from <= sequence < to, in order.
func (s *EventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !pgText(executionID) || from >= to {
		return nil, nil
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.eventsRange, executionID, from, to)
	if err != nil {
		return nil, s.readErr("read events", err)
	}
	return s.scanEvents(executionID, rows)
}

// scanEvents reads rows of eventCols and closes them.
func (s *EventStore) scanEvents(executionID string, rows pgx.Rows) ([]event.Envelope, error) {
	out, err := scanEventRows(executionID, rows)
	if err != nil {
		return nil, s.readErr("read events", err)
	}
	return out, nil
}

// scanEventRows reads rows of eventCols of executionID, from the events or
// the archive table, and closes them.
func scanEventRows(executionID string, rows pgx.Rows) ([]event.Envelope, error) {
	var out []event.Envelope
	var e event.Envelope
	var payload []byte
	var meta *string
	_, err := pgx.ForEachRow(rows, []any{&e.Sequence, &e.ID, &e.WorkflowID, &e.Type, &e.Timestamp, &payload, &meta},
		func() error {
			ev := e
			ev.ExecutionID = executionID
			ev.Payload = json.RawMessage(payload)
			if meta != nil {
				m, err := decodeMetadata(*meta)
				if err != nil {
					return err
				}
				ev.Metadata = m
			}
			out = append(out, ev)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListExecutions implements store.EventStore: up to limit executions (at
// most MaxListPage) whose id sorts after after in code-point order — the
// ids are text COLLATE "C", compared byte by byte, which is code-point
// order for UTF-8; a limit below 1 means DefaultListPage. Next is the last
// id of the page when more follow, "" otherwise. Deleted executions are not
// listed. An after that is not valid UTF-8, or holds NUL, is refused with an
// *event.InvalidEnvelopeError (Field "after").
func (s *EventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := s.check(); err != nil {
		return store.ExecutionPage{}, err
	}
	if !pgText(after) {
		return store.ExecutionPage{}, &event.InvalidEnvelopeError{Field: "after", Reason: "not valid UTF-8 or holds NUL"}
	}
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	rows, err := s.db.pool.Query(ctx, s.db.q.listExecutions, after, limit+1)
	if err != nil {
		return store.ExecutionPage{}, s.readErr("list executions", err)
	}
	var page store.ExecutionPage
	var info store.ExecutionInfo
	_, err = pgx.ForEachRow(rows, []any{&info.ExecutionID, &info.WorkflowID, &info.Length}, func() error {
		page.Executions = append(page.Executions, info)
		return nil
	})
	if err != nil {
		return store.ExecutionPage{}, s.readErr("list executions", err)
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
// executionID from from on, first those stored, then each one appended
// later by any process sharing the schema. The first Subscribe of a DB
// starts its LISTEN connection. Wake-ups come from this process's own
// commits at once, and from other processes' through NOTIFY; each wake-up
// re-reads the log from the last delivered sequence, so a lost notification
// (the LISTEN connection dropped) loses no event: the reconnect, or the
// re-read ticker (Options.RereadInterval), wakes every subscriber. It ends
// when ctx ends or the subscription is closed (Err nil), or when s or its
// DB is closed (Err store.ErrClosed).
func (s *EventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if from < 0 {
		from = 0
	}
	s.db.listen.start()
	read := func(ctx context.Context, next int64) ([]event.Envelope, error) {
		return s.ReadFrom(ctx, executionID, next)
	}
	wait := func() <-chan struct{} { return s.db.wake.Wait(executionID) }
	return store.Follow(ctx, read, wait, from), nil
}
