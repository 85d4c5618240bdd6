package sqlite

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// CopyPrefix implements store.PrefixCopier for fork: in one write
// transaction it copies the events of from with sequence <= through into
// the new execution to, inside SQLite (INSERT … SELECT: no decoding, the
// stored bytes move as they are) with only execution_id changed. It refuses
// with *store.InvalidAppendError for a bad target id, a negative through or
// a source holding fewer than through+1 events, then with
// *store.SequenceConflictError when to already has events; a refusal copies
// nothing. A source trimmed through sequence T (TrimThrough) has no events
// 1..T to copy: a through in 1..T is refused with *store.InvalidAppendError
// too, and a later one copies #0 and T+1..through, the copy getting trim
// point T. In the same transaction the copy gets the status index entry
// and the catalog entry of its prefix (read from the prefix's status
// events that remain, last first; the catalog's start time and tenant from
// its first event), and the continued executions waiting for to as their
// successor are handed over.
func (s *EventStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := event.ValidateID("executionId", to); err != nil {
		return &store.InvalidAppendError{Index: -1, Reason: "bad target execution id", Err: err}
	}
	if through < 0 {
		return &store.InvalidAppendError{Index: -1, Reason: "negative prefix end"}
	}
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error { return copyPrefix(c, from, to, through) })
	})
	if err == nil {
		s.db.wake.Notify(to)
	}
	return err
}

func copyPrefix(c *rawConn, from, to string, through int64) error {
	fromLen, err := storedLength(c, from)
	if err != nil {
		return err
	}
	if fromLen < through+1 {
		return &store.InvalidAppendError{Index: -1, Reason: fmt.Sprintf("source holds fewer than %d events", through+1)}
	}
	trimmed, _, err := c.queryInt64(sqlTrimPoint, from)
	if err != nil {
		return err
	}
	if through >= 1 && through <= trimmed {
		return &store.InvalidAppendError{Index: -1, Reason: fmt.Sprintf(
			"the source's events through #%d were trimmed (compacted): copy through a later sequence", trimmed)}
	}
	want := through + 1 // the events the copy gets, and its trim point
	if through < trimmed {
		trimmed = 0 // through 0: only the start event, nothing trimmed before it
	}
	want -= trimmed
	toLen, err := storedLength(c, to)
	if err != nil {
		return err
	}
	if toLen > 0 {
		return &store.SequenceConflictError{ExecutionID: to, Expected: 0, Actual: toLen}
	}
	n, err := c.exec(`INSERT INTO events (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata)
		SELECT ?, sequence, id, workflow_id, event_type, timestamp, payload, metadata
		FROM events WHERE execution_id = ? AND sequence <= ?`, to, from, through)
	if err != nil {
		return err
	}
	c.lengths.forget(to)
	if n != want {
		return fmt.Errorf("sqlite: copy prefix of %q: copied %d events, the log says %d", from, n, want)
	}
	_, err = c.exec(`INSERT INTO executions (execution_id, workflow_id, trimmed)
		SELECT ?, workflow_id, ? FROM executions WHERE execution_id = ?
		ON CONFLICT (execution_id) DO UPDATE SET workflow_id = excluded.workflow_id, trimmed = excluded.trimmed`, to, trimmed, from)
	if err != nil || store.IsInboxStream(to) {
		return err
	}
	change, err := prefixStatus(c, to, through)
	if err != nil {
		return err
	}
	if err := indexChange(c, to, true, change); err != nil {
		return err
	}
	return copyEntry(c, to, through)
}

// DeleteExecution implements store.ExecutionDeleter: it removes every event
// of executionID, its listing entry, its status index entry and its
// catalog entry, in one transaction, and lists again the continued executions whose successor it
// was. Deleting an unknown execution is not an error. Fencing tokens are kept, so a token
// acquired later is still greater than every earlier one.
func (s *EventStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			c.lengths.forget(executionID)
			if _, err := c.exec(`DELETE FROM events WHERE execution_id = ?`, executionID); err != nil {
				return err
			}
			if _, err := c.exec(`DELETE FROM executions WHERE execution_id = ?`, executionID); err != nil {
				return err
			}
			if _, err := c.exec(sqlEndUnfinished, executionID); err != nil {
				return err
			}
			if _, err := c.exec(sqlDropEntry, executionID); err != nil {
				return err
			}
			_, err := c.exec(sqlTakeAgain, executionID)
			return err
		})
	})
}

// AcquireFence implements store.Fencer: it returns a token greater than
// every token acquired before for executionID (1 for the first), durable
// before it returns; from then on AppendFenced under an older token is
// refused with *store.FencedError. Tokens survive DeleteExecution. A bad
// id is refused with the *event.InvalidEnvelopeError of event.ValidateID.
func (s *EventStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return 0, err
	}
	var token int64
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(`INSERT INTO fences (execution_id, token) VALUES (?, 1)
				ON CONFLICT (execution_id) DO UPDATE SET token = token + 1`, executionID)
			if err != nil {
				return err
			}
			token, _, err = c.queryInt64(sqlFenceToken, executionID)
			return err
		})
	})
	return token, err
}
