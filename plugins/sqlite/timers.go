package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"

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

var (
	_ store.TimerStore   = (*TimerStore)(nil)
	_ store.TimerClaimer = (*TimerStore)(nil)
)

// timerCols are the columns scanTimer reads, in its order.
const timerCols = `key, execution_id, wake_at, payload`

// sqlPutTimer is Put's upsert: a new key inserts, a taken one is replaced
// whole, which ends a ClaimDue claim of it.
const sqlPutTimer = `INSERT INTO timers (key, execution_id, wake_at, payload) VALUES (?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET execution_id = excluded.execution_id,
		wake_at = excluded.wake_at, payload = excluded.payload, claimed_by = NULL, claimed_until = 0`

// sqlClaimDue claims, in one statement, the first due timers no claim
// holds at now, walking the timers_due index. Arguments: owner, claimed
// until, now (due), now (claims), limit.
const sqlClaimDue = `UPDATE timers SET claimed_by = ?, claimed_until = ?
	WHERE key IN (SELECT key FROM timers WHERE wake_at <= ? AND claimed_until <= ?
		ORDER BY wake_at, key LIMIT ?)
	RETURNING ` + timerCols

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

// ClaimDue implements store.TimerClaimer: in one write transaction it
// claims for owner, until now+ttl, up to limit timers with WakeAt <= now
// that no claim holds at now (claimed_until <= now), and returns them
// ordered by WakeAt then Key; DefaultDueLimit when limit < 1. The writer
// runs one transaction at a time, so callers in this process or another
// on the file never get one timer within one claim. A claim ends at its
// expiry, when Delete removes the timer, or when Put replaces it. It
// refuses an owner event.ValidateID refuses, or a ttl below 1, with an
// *event.InvalidEnvelopeError.
func (s *TimerStore) ClaimDue(ctx context.Context, owner string, now, ttl int64, limit int) ([]store.Timer, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := store.ValidateTimerClaim(owner, now, ttl); err != nil {
		return nil, err
	}
	if limit < 1 {
		limit = DefaultDueLimit
	}
	var out []store.Timer
	err := s.db.w.run(ctx, func(c *rawConn) error {
		out = out[:0]
		return c.inTx(func() error {
			return eachRow(c, func(row []driver.Value) (bool, error) {
				t, err := timerFromRow(row)
				out = append(out, t)
				return true, err
			}, sqlClaimDue, owner, now+ttl, now, now, int64(limit))
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b store.Timer) int {
		return cmp.Or(cmp.Compare(a.WakeAt, b.WakeAt), cmp.Compare(a.Key, b.Key))
	})
	return out, nil
}

// timerFromRow reads one driver row of timerCols.
func timerFromRow(row []driver.Value) (store.Timer, error) {
	var t store.Timer
	var ok bool
	if t.Key, ok = row[0].(string); !ok {
		return t, fmt.Errorf("sqlite: timer key is %T", row[0])
	}
	if row[1] != nil {
		if t.ExecutionID, ok = row[1].(string); !ok {
			return t, fmt.Errorf("sqlite: timer execution id is %T", row[1])
		}
	}
	if t.WakeAt, ok = row[2].(int64); !ok {
		return t, fmt.Errorf("sqlite: timer wake time is %T", row[2])
	}
	p, err := textValue(row[3])
	if len(p) > 0 {
		t.Payload = []byte(p)
	}
	return t, err
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
