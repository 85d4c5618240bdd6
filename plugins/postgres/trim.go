package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/store"
)

// TrimThrough implements store.PrefixTrimmer: in one transaction it locks
// the execution's row (FOR UPDATE, as DeleteExecution's first write does,
// so an append in flight on the log commits first or waits), checks the
// request against the row's length and trim point with store.ValidateTrim
// (*store.TrimError: an unknown or deleted execution, a through below 1 or
// at the last event or past it; nothing removed), deletes the events trim
// point+1..through and records through as the trim point. The length and
// the fence are not touched: appends go on at the same expected length, and
// a fenced driver stays fenced. A through at or below the trim point
// changes nothing and returns nil. Nothing is notified: no event was added.
func (s *EventStore) TrimThrough(ctx context.Context, executionID string, through int64) error {
	if err := s.check(); err != nil {
		return err
	}
	if !pgText(executionID) {
		_, err := store.ValidateTrim(executionID, through, 0, 0) // never stored
		return err
	}
	err := inTx(ctx, s.db.pool, func(tx pgx.Tx) error { return s.trimThrough(ctx, tx, executionID, through) })
	var te *store.TrimError
	if err != nil && !errors.As(err, &te) {
		return s.readErr("trim log", err)
	}
	return err
}

func (s *EventStore) trimThrough(ctx context.Context, tx pgx.Tx, executionID string, through int64) error {
	var length, trimmed int64
	err := tx.QueryRow(ctx, s.db.q.trimLock, executionID).Scan(&length, &trimmed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	more, err := store.ValidateTrim(executionID, through, length, trimmed)
	if err != nil || !more {
		return err
	}
	tag, err := tx.Exec(ctx, s.db.q.trimEvents, executionID, trimmed, through)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != through-trimmed { // the log is contiguous past its trim point
		return fmt.Errorf("postgres: trim %q through #%d: removed %d events, want %d",
			executionID, through, tag.RowsAffected(), through-trimmed)
	}
	_, err = tx.Exec(ctx, s.db.q.trimMark, executionID, through)
	return err
}

// TrimmedThrough implements store.PrefixTrimmer: the log's trim point, as
// committed when the read starts; 0 when nothing was trimmed and for an
// unknown or deleted execution.
func (s *EventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if !pgText(executionID) {
		return 0, nil // never stored
	}
	var through int64
	err := s.db.pool.QueryRow(ctx, s.db.q.trimPoint, executionID).Scan(&through)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.readErr("read trim point", err)
	}
	return through, nil
}
