package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ListUnfinished implements store.StatusIndex: up to limit (at most
// MaxListPage; DefaultListPage below 1) unfinished executions whose id
// sorts after after in code-point order (COLLATE "C"), from the
// unfinished table, which the append statement itself changes (see
// appendSQL), and CopyPrefix and DeleteExecution in their transactions, so
// every process sharing the schema sees it agree with the log. A page
// reads the (listed, execution_id) index from after and stops at its
// LIMIT: it costs its own length, however many executions have ended. Next
// is the last id of the page when more follow, "" otherwise. A schema
// written before the index existed gets it, filled from its logs, when Open
// migrates it (migration 7). An after that is not valid UTF-8, or holds
// NUL, is refused with an *event.InvalidEnvelopeError (Field "after").
func (s *EventStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := s.check(); err != nil {
		return store.UnfinishedPage{}, err
	}
	if !pgText(after) {
		return store.UnfinishedPage{}, &event.InvalidEnvelopeError{Field: "after", Reason: "not valid UTF-8 or holds NUL"}
	}
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	rows, err := s.db.pool.Query(ctx, s.db.q.listUnfinished, after, limit+1)
	if err != nil {
		return store.UnfinishedPage{}, s.readErr("list unfinished executions", err)
	}
	var page store.UnfinishedPage
	var u store.UnfinishedExecution
	var status string
	_, err = pgx.ForEachRow(rows, []any{&u.ExecutionID, &u.WorkflowID, &status, &u.Sequence, &u.Timestamp, &u.NextExecutionID},
		func() error {
			u.Status = store.UnfinishedStatus(status)
			page.Executions = append(page.Executions, u)
			return nil
		})
	if err != nil {
		return store.UnfinishedPage{}, s.readErr("list unfinished executions", err)
	}
	if len(page.Executions) > limit {
		page.Executions = page.Executions[:limit]
		page.Next = page.Executions[limit-1].ExecutionID
	}
	return page, nil
}

// statusTypes is store.StatusTypes, the parameter of lastStatusEvent.
var statusTypes = store.StatusTypes()

// prefixStatus returns what the events of execID with sequence <= through
// do to an entry (store.StatusChangeOf of that prefix), reading its status
// events one at a time from the end (one backward index seek each) until
// one moves it: the change of a fork's copy.
func (s *EventStore) prefixStatus(ctx context.Context, tx pgx.Tx, execID string, through int64) (store.StatusChange, error) {
	e, found, err := lastMoving(txStatusReader(ctx, tx, s.db.q.lastStatusEvent, execID), through, func(e event.Envelope) bool {
		return store.EventStatus(e).Move != store.StatusKept
	})
	if err != nil {
		return store.StatusChange{}, err
	}
	if found {
		return store.EventStatus(e), nil
	}
	var ts int64
	if err := tx.QueryRow(ctx, s.db.q.firstTimestamp, execID).Scan(&ts); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return store.StatusChange{}, fmt.Errorf("postgres: log %q has no first event", execID)
		}
		return store.StatusChange{}, err
	}
	return store.StatusChange{Move: store.StatusSet, Status: store.UnfinishedRunning, Timestamp: ts}, nil
}

// statusReader returns the last event of one log at or before sequence
// bound of a type store.StatusTypes names, and false when there is none.
type statusReader func(bound int64) (event.Envelope, bool, error)

// lastMoving returns the last event of a log at or before through for
// which moves is true, reading its status events with read from the end
// until one is; false when none is.
func lastMoving(read statusReader, through int64, moves func(event.Envelope) bool) (event.Envelope, bool, error) {
	for bound := through; bound >= 0; {
		e, found, err := read(bound)
		if err != nil || !found {
			return event.Envelope{}, false, err
		}
		if moves(e) {
			return e, true, nil
		}
		bound = e.Sequence - 1
	}
	return event.Envelope{}, false, nil
}

// txStatusReader reads the status events of execID inside tx with the
// statement lastStatusEvent (of the queries, or of a migration).
func txStatusReader(ctx context.Context, tx pgx.Tx, lastStatusEvent, execID string) statusReader {
	return func(bound int64) (event.Envelope, bool, error) {
		e := event.Envelope{ExecutionID: execID}
		var payload []byte
		var meta *string
		err := tx.QueryRow(ctx, lastStatusEvent, execID, bound, statusTypes).
			Scan(&e.Sequence, &e.Type, &e.Timestamp, &payload, &meta)
		if errors.Is(err, pgx.ErrNoRows) {
			return e, false, nil
		}
		if err != nil {
			return e, false, err
		}
		e.Payload = json.RawMessage(payload)
		if meta != nil {
			if e.Metadata, err = decodeMetadata(*meta); err != nil {
				return e, false, err
			}
		}
		return e, true, nil
	}
}

// indexChange applies change to the entry of execID inside tx; created
// says the write gave execID its first events, which hands over the
// continued executions waiting for it.
func (s *EventStore) indexChange(ctx context.Context, tx pgx.Tx, execID string, created bool, change store.StatusChange) error {
	if created {
		if _, err := tx.Exec(ctx, s.db.q.handOver, execID); err != nil {
			return err
		}
	}
	var err error
	switch {
	case change.Move == store.StatusEnded:
		_, err = tx.Exec(ctx, s.db.q.endUnfinished, execID)
	case change.Move != store.StatusSet:
	case change.Status == store.UnfinishedContinued:
		_, err = tx.Exec(ctx, s.db.q.setContinued, execID, change.Sequence, change.Timestamp, change.Next)
	default:
		_, err = tx.Exec(ctx, s.db.q.setUnfinished, execID, string(change.Status), change.Sequence, change.Timestamp)
	}
	return err
}
