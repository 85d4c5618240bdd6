package postgres

import (
	"context"
	"errors"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/store"
)

// DefaultDueLimit is how many timers Due returns at most when its limit is
// below 1.
const DefaultDueLimit = 1000

// MaxTimerPayloadBytes caps a timer's payload: event.DefaultMaxPayloadBytes,
// whatever Options.Limits sets for appends (a timer payload is written by
// the kernel and is small; the cap only bounds a bad caller).
const MaxTimerPayloadBytes = store.MaxTimerPayloadBytes

// TimerStore keeps the durable timers of a DB in the timers table and
// implements store.TimerStore. Put and Delete are single statements, each
// its own transaction, durable before they return: a crash before the
// commit leaves the previous timer, after it the new one. Due is one range
// scan of the (wake_at, key) index, so a page of k timers costs
// O(k + log n) whatever the number n of stored timers.
//
// Due is a plain read, not a claim: two nodes polling one schema with Due
// may both see a timer; that is harmless by the SPI's contract (the log
// decides what a firing does, and a duplicate or stale one is refused
// there), and exactly one of their Deletes reports true. ClaimDue
// (store.TimerClaimer) hands each due timer to one node instead: it
// records a claim (owner and expiry) on the row, which outlasts the
// statement, so nodes polling with ClaimDue fire each timer once while the
// claim lives. Put clears the claim; Delete is unchanged.
//
// One from DB.TimerStore shares its DB, and Close only detaches it; one
// from OpenTimerStore owns its DB, and Close closes it.
type TimerStore struct {
	view
}

var (
	_ store.TimerStore   = (*TimerStore)(nil)
	_ store.TimerClaimer = (*TimerStore)(nil)
)

// Put implements store.TimerStore: it stores t under t.Key, replacing any
// timer with that key (wake time, execution id and payload alike; an
// upsert, so racing Puts leave one of them whole), durably before it
// returns. The payload is stored as the text given; an empty one is stored
// as absent (NULL), and so is an empty execution id. Before anything is
// written it refuses, with the *event.InvalidEnvelopeError of
// event.ValidateID, an invalid key or a non-empty invalid execution id, and
// a payload that is neither empty nor valid UTF-8 JSON (an
// *event.InvalidEnvelopeError) or exceeds MaxTimerPayloadBytes (an
// *event.PayloadTooLargeError).
func (s *TimerStore) Put(ctx context.Context, t store.Timer) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateTimer(t); err != nil {
		return err
	}
	var exec, payload *string // nil binds NULL
	if t.ExecutionID != "" {
		exec = &t.ExecutionID
	}
	if len(t.Payload) > 0 {
		p := string(t.Payload)
		payload = &p
	}
	if _, err := s.db.pool.Exec(ctx, s.db.q.timerPut, t.Key, exec, t.WakeAt, payload); err != nil {
		return s.readErr("put timer", err)
	}
	return nil
}

// Get implements store.TimerStore: the timer under key, or false when there
// is none. Its payload is the stored text, nil when absent.
func (s *TimerStore) Get(ctx context.Context, key string) (store.Timer, bool, error) {
	if err := s.check(); err != nil {
		return store.Timer{}, false, err
	}
	if !pgText(key) {
		return store.Timer{}, false, nil
	}
	var t store.Timer
	var exec *string
	var payload []byte
	err := s.db.pool.QueryRow(ctx, s.db.q.timerGet, key).Scan(&t.Key, &exec, &t.WakeAt, &payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Timer{}, false, nil
	}
	if err != nil {
		return store.Timer{}, false, s.readErr("get timer", err)
	}
	return timerOf(t, exec, payload), true, nil
}

// Due implements store.TimerStore: up to limit timers with WakeAt <= now,
// ordered by WakeAt then Key in code-point order (keys are text
// COLLATE "C"); DefaultDueLimit when limit < 1. It reads the last committed
// state and removes and locks nothing (see TimerStore): the caller deletes
// what it fired.
func (s *TimerStore) Due(ctx context.Context, now int64, limit int) ([]store.Timer, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit < 1 {
		limit = DefaultDueLimit
	}
	rows, err := s.db.pool.Query(ctx, s.db.q.timerDue, now, limit)
	if err != nil {
		return nil, s.readErr("due timers", err)
	}
	out, err := scanTimers(rows)
	if err != nil {
		return nil, s.readErr("due timers", err)
	}
	return out, nil
}

// scanTimers reads the timers of rows (timerCols) and closes rows.
func scanTimers(rows pgx.Rows) ([]store.Timer, error) {
	var out []store.Timer
	var t store.Timer
	var exec *string
	var payload []byte
	_, err := pgx.ForEachRow(rows, []any{&t.Key, &exec, &t.WakeAt, &payload}, func() error {
		out = append(out, timerOf(t, exec, payload))
		return nil
	})
	return out, err
}

// ClaimDue implements store.TimerClaimer: in one statement it claims for
// owner, until now+ttl, up to limit timers with WakeAt <= now that hold no
// live claim (never claimed, claim cleared by Put, or claim expired at
// now: its claimer died), and returns them ordered by WakeAt then Key;
// DefaultDueLimit when limit < 1. Rows another node is claiming at the
// same moment are skipped (FOR UPDATE SKIP LOCKED), so of any number of
// nodes claiming at once each timer goes to one; a node may get fewer than
// limit while another holds the rest. The claim is durable before
// ClaimDue returns. Before anything is written it refuses, with an
// *event.InvalidEnvelopeError, an owner event.ValidateID refuses, a ttl
// below 1 and a now+ttl past math.MaxInt64.
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
	rows, err := s.db.pool.Query(ctx, s.db.q.timerClaimDue, now, owner, now+ttl, limit)
	if err != nil {
		return nil, s.readErr("claim due timers", err)
	}
	out, err := scanTimers(rows)
	if err != nil {
		return nil, s.readErr("claim due timers", err)
	}
	// RETURNING has no order; keys compare as bytes, like COLLATE "C".
	sort.Slice(out, func(i, j int) bool {
		if out[i].WakeAt != out[j].WakeAt {
			return out[i].WakeAt < out[j].WakeAt
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// Delete implements store.TimerStore: it removes the timer under key iff
// its WakeAt is wakeAt, in one durable statement, and reports whether a
// row was deleted. A timer stored again under key with another wake time
// survives; a missing key reports false; of two nodes deleting the same
// timer, exactly one gets true.
func (s *TimerStore) Delete(ctx context.Context, key string, wakeAt int64) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if !pgText(key) {
		return false, nil
	}
	tag, err := s.db.pool.Exec(ctx, s.db.q.timerDelete, key, wakeAt)
	if err != nil {
		return false, s.readErr("delete timer", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Close implements store.TimerStore: later calls return store.ErrClosed. A
// store from OpenTimerStore closes its DB; one from DB.TimerStore only
// detaches. A second Close returns nil.
func (s *TimerStore) Close() error { return s.close() }

// timerOf completes a scanned timer with its nullable columns.
func timerOf(t store.Timer, exec *string, payload []byte) store.Timer {
	t.ExecutionID, t.Payload = "", nil
	if exec != nil {
		t.ExecutionID = *exec
	}
	if len(payload) > 0 {
		t.Payload = payload
	}
	return t
}
