package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/store"
)

// Trim points (store.PrefixTrimmer): a log's trim point is the trimmed
// column of its executions row (migration 9), 0 until TrimThrough moves
// it. The trimmed events are deleted from the events table, so every read
// (ReadFrom, ReadRange, Subscribe, the read-only store) skips them with no
// change of its own, and the log's length, MAX(sequence)+1, is unchanged:
// the last event always stays.
const (
	sqlTrimPoint  = `SELECT trimmed FROM executions WHERE execution_id = ?`
	sqlTrimEvents = `DELETE FROM events WHERE execution_id = ? AND sequence > ? AND sequence <= ?`
	sqlSetTrimmed = `UPDATE executions SET trimmed = ? WHERE execution_id = ?`
)

// TrimThrough implements store.PrefixTrimmer: in one write transaction on
// the DB's writer it reads the log's length and trim point, checks the
// request with store.ValidateTrim (*store.TrimError: an unknown execution,
// a through below 1 or at the last event or past it; nothing removed),
// deletes the events trim point+1..through and records through as the new
// trim point. A through at or below the trim point commits nothing and
// returns nil. An append to the log, queued on the same writer, commits
// before the trim or after it, and its expected length is the same either
// way. A crash before the commit leaves the log as it was; after it, trimmed.
func (s *EventStore) TrimThrough(ctx context.Context, executionID string, through int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error { return trimThrough(c, executionID, through) })
	})
}

func trimThrough(c *rawConn, executionID string, through int64) error {
	length, err := storedLength(c, executionID)
	if err != nil {
		return err
	}
	trimmed, _, err := c.queryInt64(sqlTrimPoint, executionID)
	if err != nil {
		return err
	}
	more, err := store.ValidateTrim(executionID, through, length, trimmed)
	if err != nil || !more {
		return err
	}
	n, err := c.exec(sqlTrimEvents, executionID, trimmed, through)
	if err != nil {
		return err
	}
	if n != through-trimmed { // the log's sequences are contiguous past its trim point
		return fmt.Errorf("sqlite: trim %q through #%d: removed %d events, want %d", executionID, through, n, through-trimmed)
	}
	n, err = c.exec(sqlSetTrimmed, through, executionID)
	if err == nil && n != 1 {
		err = fmt.Errorf("sqlite: trim %q: the log has no executions row", executionID)
	}
	return err
}

// TrimmedThrough implements store.PrefixTrimmer: the log's trim point, as
// committed when the read starts; 0 when nothing was trimmed and for an
// unknown (or deleted) execution.
func (s *EventStore) TrimmedThrough(ctx context.Context, executionID string) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var through int64
	err := s.db.reads.trimPoint.QueryRowContext(ctx, executionID).Scan(&through)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.db.readErr("read trim point", err)
	}
	return through, nil
}
