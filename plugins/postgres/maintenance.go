package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// CopyPrefix implements store.PrefixCopier for fork: in one transaction it
// copies the events of from with sequence <= through into the new
// execution to, inside PostgreSQL (INSERT … SELECT: no decoding, the
// stored text moves as it is) with only execution_id changed, and notifies
// to's subscribers on commit. It refuses with *store.InvalidAppendError for
// a bad target id, a negative through or a source holding fewer than
// through+1 events, then with *store.SequenceConflictError when to already
// has events; a refusal copies nothing. A source trimmed through sequence
// T (TrimThrough) has no events 1..T to copy: a through in 1..T is refused
// with *store.InvalidAppendError too, and a later one copies #0 and
// T+1..through, the copy getting trim point T. The source row is
// share-locked for the copy, so a concurrent DeleteExecution or
// TrimThrough of from waits for it. In the same transaction the copy gets
// the status index entry and the catalog entry of its prefix (read from
// the prefix's status events that remain, last first; the catalog's start
// time and tenant from its first event), and the continued executions
// waiting for to as their successor are handed over.
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
	short := &store.InvalidAppendError{Index: -1, Reason: fmt.Sprintf("source holds fewer than %d events", through+1)}
	if !pgText(from) {
		return short // never stored
	}
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error { return s.copyPrefix(ctx, tx, from, to, through, short) })
	if err != nil {
		var ie *store.InvalidAppendError
		var ce *store.SequenceConflictError
		if errors.As(err, &ie) || errors.As(err, &ce) {
			return err
		}
		return s.readErr("copy prefix", err)
	}
	s.db.wake.Notify(to)
	return nil
}

func (s *EventStore) copyPrefix(ctx context.Context, tx pgx.Tx, from, to string, through int64, short error) error {
	var fromLen, trimmed int64
	var workflowID string
	err := tx.QueryRow(ctx, s.db.q.copyPrefixSource, from).Scan(&fromLen, &workflowID, &trimmed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if fromLen < through+1 {
		return short
	}
	if through >= 1 && through <= trimmed {
		return &store.InvalidAppendError{Index: -1, Reason: fmt.Sprintf(
			"the source's events through #%d were trimmed (compacted): copy through a later sequence", trimmed)}
	}
	if through < trimmed {
		trimmed = 0 // through 0: only the start event, nothing trimmed before it
	}
	tag, err := tx.Exec(ctx, s.db.q.copyPrefixClaim, to, workflowID, through+1, trimmed)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		var actual int64
		if err := tx.QueryRow(ctx, s.db.q.logLength, to).Scan(&actual); err != nil {
			return err
		}
		return &store.SequenceConflictError{ExecutionID: to, Expected: 0, Actual: actual}
	}
	tag, err = tx.Exec(ctx, s.db.q.copyPrefixEvents, to, from, through)
	if err != nil {
		return err
	}
	if want := through + 1 - trimmed; tag.RowsAffected() != want {
		return fmt.Errorf("postgres: copy prefix of %q: copied %d events, the log says %d", from, tag.RowsAffected(), want)
	}
	if !store.IsInboxStream(to) {
		change, err := s.prefixStatus(ctx, tx, to, through)
		if err != nil {
			return err
		}
		if err := s.indexChange(ctx, tx, to, true, change); err != nil {
			return err
		}
		if err := s.copyEntry(ctx, tx, to, workflowID, through); err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, s.db.q.notify, s.db.channel, to)
	return err
}

// DeleteExecution implements store.ExecutionDeleter: in one transaction it
// removes every event of executionID, its listing entry, its status index
// entry and its catalog entry, and lists again the continued executions whose successor it
// was. Deleting an unknown execution is not an error. The execution's row
// stays at length 0 with its fence (and trim point 0), so a token acquired later is still
// greater than every earlier one, and an append at 0 starts the log again. An append in flight
// on the execution either commits before the delete (and is deleted) or
// after it (and is refused, unless it expected 0).
func (s *EventStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := s.check(); err != nil {
		return err
	}
	if !pgText(executionID) {
		return nil // never stored
	}
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
		for _, q := range []string{s.db.q.deleteLog, s.db.q.deleteEvents, s.db.q.endUnfinished, s.db.q.dropEntry, s.db.q.takeAgain} {
			if _, err := tx.Exec(ctx, q, executionID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.readErr("delete execution", err)
	}
	return nil
}

// AcquireFence implements store.Fencer: it returns a token greater than
// every token acquired before for executionID (1 for the first), durable
// before it returns; from then on AppendFenced under an older token is
// refused with *store.FencedError, by every process sharing the schema.
// Tokens survive DeleteExecution. A bad id is refused with the
// *event.InvalidEnvelopeError of event.ValidateID.
func (s *EventStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return 0, err
	}
	var token int64
	if err := s.db.pool.QueryRow(ctx, s.db.q.acquireFence, executionID).Scan(&token); err != nil {
		return 0, s.readErr("acquire fence", err)
	}
	return token, nil
}
