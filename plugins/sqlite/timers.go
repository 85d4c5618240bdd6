package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/loom-kernel/loom/store"
)

// DefaultDueLimit is how many timers Due returns at most when its limit is
// below 1.
const DefaultDueLimit = 1000

// MaxTimerPayloadBytes caps a timer's payload: event.DefaultMaxPayloadBytes,
// whatever WithLimits sets for appends (a timer payload is written by the
// kernel and is small; the cap only bounds a bad caller).
const MaxTimerPayloadBytes = store.MaxTimerPayloadBytes

// TimerStore keeps the durable timers of a DB in the timers table and
// implements store.TimerStore. Put and Delete are write transactions on the
// DB's writer, one each, durable (fsynced under SyncFull) before they
// return; a crash before the commit leaves the previous timer, after it the
// new one. Get and Due use the read pool: Due is one range scan of the
// (wake_at, key) index, so a page of k timers costs O(k + log n) whatever
// the number n of stored timers. One from DB.TimerStore shares its DB, and
// Close only detaches it; one from OpenTimerStore owns its DB, and Close
// closes it.
type TimerStore struct {
	view
}

var _ store.TimerStore = (*TimerStore)(nil)

// timerCols are the columns scanTimer reads, in its order.
const timerCols = `key, execution_id, wake_at, payload`

// sqlPutTimer is Put's upsert: a new key inserts, a taken one is replaced
// whole.
const sqlPutTimer = `INSERT INTO timers (key, execution_id, wake_at, payload) VALUES (?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET execution_id = excluded.execution_id,
		wake_at = excluded.wake_at, payload = excluded.payload`

// Put implements store.TimerStore: it stores t under t.Key, replacing any
// timer with that key (wake time, execution id and payload alike), durably
// before it returns. The payload is stored as the text given; an empty one
// is stored as absent (NULL), and so is an empty execution id. Before
// anything is written it refuses, with the *event.InvalidEnvelopeError of
// event.ValidateID, an invalid key (empty, not UTF-8, a control character,
// longer than event.MaxIDBytes) or a non-empty invalid execution id, and a
// payload that is neither empty nor valid UTF-8 JSON (an
// *event.InvalidEnvelopeError) or exceeds MaxTimerPayloadBytes (an
// *event.PayloadTooLargeError). If ctx ends while the write is still queued,
// Put returns ctx.Err() and writes nothing.
func (s *TimerStore) Put(ctx context.Context, t store.Timer) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateTimer(t); err != nil {
		return err
	}
	var exec, payload any // nil binds NULL
	if t.ExecutionID != "" {
		exec = t.ExecutionID
	}
	if len(t.Payload) > 0 {
		payload = string(t.Payload)
	}
	return s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			_, err := c.exec(sqlPutTimer, t.Key, exec, t.WakeAt, payload)
			return err
		})
	})
}

// Get implements store.TimerStore: the timer under key, or false when there
// is none. Its payload is the stored text, nil when absent.
func (s *TimerStore) Get(ctx context.Context, key string) (store.Timer, bool, error) {
	if err := s.check(); err != nil {
		return store.Timer{}, false, err
	}
	t, err := scanTimer(s.db.reads.timer.QueryRowContext(ctx, key))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Timer{}, false, nil
	}
	if err != nil {
		return store.Timer{}, false, s.db.readErr("get timer", err)
	}
	return t, true, nil
}

// Due implements store.TimerStore: up to limit timers with WakeAt <= now,
// ordered by WakeAt then Key in code-point order (SQLite's BINARY
// collation on UTF-8); DefaultDueLimit when limit < 1. It reads the last
// committed state and removes nothing: the caller deletes what it fired.
func (s *TimerStore) Due(ctx context.Context, now int64, limit int) ([]store.Timer, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit < 1 {
		limit = DefaultDueLimit
	}
	rows, err := s.db.reads.timersDue.QueryContext(ctx, now, limit)
	if err != nil {
		return nil, s.db.readErr("due timers", err)
	}
	var out []store.Timer
	for rows.Next() {
		t, err := scanTimer(rows)
		if err != nil {
			return nil, errors.Join(s.db.readErr("due timers", err), rows.Close())
		}
		out = append(out, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.db.readErr("due timers", err)
	}
	return out, nil
}

// Delete implements store.TimerStore: it removes the timer under key iff
// its WakeAt is wakeAt, in one durable transaction, and reports whether a
// row was deleted. A timer stored again under key with another wake time
// survives; a missing key reports false. If ctx ends while the write is
// still queued, Delete returns ctx.Err() and deletes nothing.
func (s *TimerStore) Delete(ctx context.Context, key string, wakeAt int64) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	var n int64
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() (err error) {
			n, err = c.exec(`DELETE FROM timers WHERE key = ? AND wake_at = ?`, key, wakeAt)
			return err
		})
	})
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// Close implements store.TimerStore: later calls return store.ErrClosed. A
// store from OpenTimerStore closes its DB; one from DB.TimerStore only
// detaches. A second Close returns nil.
func (s *TimerStore) Close() error { return s.close() }

// scanTimer reads one row of timerCols.
func scanTimer(row interface{ Scan(...any) error }) (store.Timer, error) {
	var t store.Timer
	var exec sql.NullString
	var payload []byte
	if err := row.Scan(&t.Key, &exec, &t.WakeAt, &payload); err != nil {
		return store.Timer{}, err
	}
	t.ExecutionID = exec.String
	if len(payload) > 0 {
		t.Payload = payload
	}
	return t, nil
}
