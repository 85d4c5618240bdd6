package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Writer-side statements of the status index (the unfinished table of
// migration 7). Each runs inside the transaction of the write it indexes.
const (
	// sqlSetUnfinished rewrites only the unindexed columns of a running or
	// suspended row (listed is 0 only on a continued row), so a status
	// change touches no index; a continued row changes status with
	// sqlLeaveContinued instead.
	sqlSetUnfinished = `INSERT INTO unfinished (execution_id, status, sequence, timestamp, next_execution_id, listed)
		VALUES (?, ?, ?, ?, NULL, 1)
		ON CONFLICT (execution_id) DO UPDATE SET status = excluded.status, sequence = excluded.sequence,
			timestamp = excluded.timestamp
		WHERE next_execution_id IS NULL`
	sqlLeaveContinued = `UPDATE unfinished SET status = ?, sequence = ?, timestamp = ?, next_execution_id = NULL, listed = 1
		WHERE execution_id = ?`
	// A continued execution is listed iff its successor has no log yet.
	sqlSetContinued = `INSERT INTO unfinished (execution_id, status, sequence, timestamp, next_execution_id, listed)
		VALUES (?, 'continued', ?, ?, ?, NOT EXISTS (SELECT 1 FROM executions WHERE execution_id = ?))
		ON CONFLICT (execution_id) DO UPDATE SET status = excluded.status, sequence = excluded.sequence,
			timestamp = excluded.timestamp, next_execution_id = excluded.next_execution_id, listed = excluded.listed`
	sqlEndUnfinished = `DELETE FROM unfinished WHERE execution_id = ?`
	// A new log hands over the continued executions waiting for it; a
	// deleted one lists them again.
	sqlHandOver  = `UPDATE unfinished SET listed = 0 WHERE next_execution_id = ? AND listed = 1 AND execution_id <> ?`
	sqlTakeAgain = `UPDATE unfinished SET listed = 1 WHERE next_execution_id = ? AND listed = 0`
)

// sqlLastStatusEvent is the last event of a log, at or before a sequence,
// of a type store.EventStatus may move on: one backward seek on the events
// key, stopping at the first such row.
var sqlLastStatusEvent = `SELECT sequence, event_type, timestamp, payload, metadata FROM events
	WHERE execution_id = ? AND sequence <= ? AND event_type IN ('` + strings.Join(store.StatusTypes(), "', '") + `')
	ORDER BY sequence DESC LIMIT 1`

// sqlFirstTimestamp is the timestamp of a log's first event.
const sqlFirstTimestamp = `SELECT timestamp FROM events WHERE execution_id = ? AND sequence = 0`

// indexChange applies change to the entry of execID inside the open
// transaction; created says the write gave execID its first events, which
// hands over the continued executions waiting for it.
func indexChange(c *rawConn, execID string, created bool, change store.StatusChange) error {
	if created {
		if _, err := c.exec(sqlHandOver, execID, execID); err != nil {
			return err
		}
	}
	var err error
	switch {
	case change.Move == store.StatusEnded:
		_, err = c.exec(sqlEndUnfinished, execID)
	case change.Move != store.StatusSet:
	case change.Status == store.UnfinishedContinued:
		_, err = c.exec(sqlSetContinued, execID, change.Sequence, change.Timestamp, change.Next, change.Next)
	default:
		var n int64
		n, err = c.exec(sqlSetUnfinished, execID, string(change.Status), change.Sequence, change.Timestamp)
		if err == nil && n == 0 {
			_, err = c.exec(sqlLeaveContinued, string(change.Status), change.Sequence, change.Timestamp, execID)
		}
	}
	return err
}

// prefixStatus returns what the events of execID with sequence <= through
// do to an entry (store.StatusChangeOf of that prefix), reading only its
// status events from the end: the change of a fork's copy.
func prefixStatus(c *rawConn, execID string, through int64) (store.StatusChange, error) {
	e, found, err := lastMoving(rawStatusReader(c, execID), through, func(e event.Envelope) bool {
		return store.EventStatus(e).Move != store.StatusKept
	})
	if err != nil {
		return store.StatusChange{}, err
	}
	if found {
		return store.EventStatus(e), nil
	}
	ts, found, err := c.queryInt64(sqlFirstTimestamp, execID)
	if err != nil {
		return store.StatusChange{}, err
	}
	if !found {
		return store.StatusChange{}, fmt.Errorf("sqlite: log %q has no first event", execID)
	}
	return store.StatusChange{Move: store.StatusSet, Status: store.UnfinishedRunning, Timestamp: ts}, nil
}

// statusReader returns the last event of one log at or before sequence
// bound of a type store.StatusTypes names, and false when there is none.
type statusReader func(bound int64) (event.Envelope, bool, error)

// lastMoving returns the last event of a log at or before through for
// which moves is true, reading its status events with read from the end
// (one backward seek each) until one is; false when none is.
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

// rawStatusReader reads the status events of execID on the write
// connection, inside its open transaction.
func rawStatusReader(c *rawConn, execID string) statusReader {
	return func(bound int64) (event.Envelope, bool, error) {
		row, found, err := c.queryRow(sqlLastStatusEvent, execID, bound)
		if err != nil || !found {
			return event.Envelope{}, false, err
		}
		e, err := statusEnvelope(row)
		return e, err == nil, err
	}
}

// statusEnvelope decodes a row of sqlLastStatusEvent.
func statusEnvelope(row []driver.Value) (event.Envelope, error) {
	var e event.Envelope
	var ok [4]bool
	e.Sequence, ok[0] = row[0].(int64)
	e.Type, ok[1] = row[1].(string)
	e.Timestamp, ok[2] = row[2].(int64)
	var payload string
	payload, ok[3] = row[3].(string)
	if ok != [4]bool{true, true, true, true} {
		return e, fmt.Errorf("sqlite: status event row of types %T %T %T %T", row[0], row[1], row[2], row[3])
	}
	e.Payload = json.RawMessage(payload)
	if meta, isText := row[4].(string); isText {
		m, err := decodeMetadata(meta)
		if err != nil {
			return e, err
		}
		e.Metadata = m
	}
	return e, nil
}

// sqlListUnfinished pages through the listed rows of unfinished by id, on
// the (listed, execution_id) index, with the workflow id ListExecutions
// reports. A continued row whose successor has a log is left out even if a
// write raced its hand-over.
const sqlListUnfinished = `SELECT u.execution_id,
	COALESCE(NULLIF(x.workflow_id, ''), (SELECT e.workflow_id FROM events e
		WHERE e.execution_id = u.execution_id AND e.workflow_id <> '' ORDER BY e.sequence LIMIT 1), ''),
	u.status, u.sequence, u.timestamp, COALESCE(u.next_execution_id, '')
	FROM unfinished u LEFT JOIN executions x ON x.execution_id = u.execution_id
	WHERE u.listed = 1 AND u.execution_id > ?
		AND (u.status <> 'continued' OR NOT EXISTS (SELECT 1 FROM executions n WHERE n.execution_id = u.next_execution_id))
	ORDER BY u.execution_id LIMIT ?`

// ListUnfinished implements store.StatusIndex: up to limit (at most
// MaxListPage; DefaultListPage below 1) unfinished executions whose id
// sorts after after in code-point order, from the unfinished table, which
// every Append, AppendFenced, CopyPrefix and DeleteExecution changes in its
// own transaction. A page reads the (listed, execution_id) index from after
// and stops at its LIMIT: it costs its own length, however many executions
// have ended. Next is the last id of the page when more follow, ""
// otherwise. A file written before the index existed gets it, filled from
// its logs, when Open migrates it (migration 7).
func (s *EventStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := s.check(); err != nil {
		return store.UnfinishedPage{}, err
	}
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	rows, err := s.db.reads.unfinished.QueryContext(ctx, after, limit+1)
	if err != nil {
		return store.UnfinishedPage{}, s.db.readErr("list unfinished executions", err)
	}
	var page store.UnfinishedPage
	for rows.Next() {
		var u store.UnfinishedExecution
		var status string
		if err := rows.Scan(&u.ExecutionID, &u.WorkflowID, &status, &u.Sequence, &u.Timestamp, &u.NextExecutionID); err != nil {
			return store.UnfinishedPage{}, errors.Join(s.db.readErr("list unfinished executions", err), rows.Close())
		}
		u.Status = store.UnfinishedStatus(status)
		page.Executions = append(page.Executions, u)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return store.UnfinishedPage{}, s.db.readErr("list unfinished executions", err)
	}
	if len(page.Executions) > limit {
		page.Executions = page.Executions[:limit]
		page.Next = page.Executions[limit-1].ExecutionID
	}
	return page, nil
}
