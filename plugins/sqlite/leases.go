package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// LeaseStore keeps the heartbeat leases of a DB in the leases table, one
// row per execution ever leased, and implements store.LeaseStore.
//
// Acquire, Renew and Release are write transactions on the DB's writer,
// one each, durable (fsynced under SyncFull) before they return; a crash
// before the commit leaves the previous lease, after it the new one. The
// writer runs one transaction at a time, so of any number of owners racing
// for a free or expired lease, in this process or another on the same file,
// exactly one wins. Get reads the last committed lease on the read pool.
//
// Tokens are per execution and only ever grow: the first grant takes 1 and
// every later one, a re-acquisition by the holder included, the row's token
// plus one. A Release only clears the row's owner, keeping its token, so
// the next grant still outranks every lease handed out before. One from
// DB.LeaseStore shares its DB, and Close only detaches it; one from
// OpenLeaseStore owns its DB, and Close closes it.
type LeaseStore struct {
	view
}

var _ store.LeaseStore = (*LeaseStore)(nil)

const (
	// sqlAcquireLease grants the lease in one statement: a new execution
	// inserts token 1; a row that is free (released), expired at now or
	// already the owner's is taken with its token plus one. A row held live
	// by another owner fails the WHERE, so nothing changes and RETURNING
	// yields no row. Arguments: execution id, owner, expiry, now.
	sqlAcquireLease = `INSERT INTO leases (execution_id, owner, token, expires_at) VALUES (?, ?, 1, ?)
	ON CONFLICT (execution_id) DO UPDATE SET owner = excluded.owner, token = leases.token + 1,
		expires_at = excluded.expires_at
	WHERE leases.owner IS NULL OR leases.owner = excluded.owner OR leases.expires_at <= ?
	RETURNING token`
	// sqlLeaseHolder reads the live holder that refused an Acquire, inside
	// its transaction.
	sqlLeaseHolder = `SELECT owner, expires_at FROM leases WHERE execution_id = ?`
	// sqlRenewLease and sqlReleaseLease change the row iff the lease is
	// still the caller's (owner and token); 0 rows means it was lost.
	sqlRenewLease   = `UPDATE leases SET expires_at = ? WHERE execution_id = ? AND owner = ? AND token = ?`
	sqlReleaseLease = `UPDATE leases SET owner = NULL WHERE execution_id = ? AND owner = ? AND token = ?`
	// sqlGetLease reads a held lease; a released row has no owner.
	sqlGetLease = `SELECT owner, token, expires_at FROM leases WHERE execution_id = ? AND owner IS NOT NULL`
)

// Acquire implements store.LeaseStore: it grants owner the lease of
// executionID until now+ttlMs when the lease is free (never granted, or
// released), expired at now (ExpiresAt <= now), or already owner's, with a
// token one above the execution's previous one, in one conditional upsert.
// Otherwise it returns a *store.LeaseHeldError naming the live holder and
// its expiry, read in the same transaction, which is rolled back: nothing
// changes. Before anything is written it refuses, with an
// *event.InvalidEnvelopeError, an executionID or owner that
// event.ValidateID refuses, a ttlMs below 1 and a now+ttlMs past
// math.MaxInt64. If ctx ends while the write is still queued, Acquire
// returns ctx.Err() and writes nothing.
func (s *LeaseStore) Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (store.Lease, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateLeaseGrant(executionID, owner, now, ttlMs); err != nil {
		return store.Lease{}, err
	}
	l := store.Lease{ExecutionID: executionID, Owner: owner, ExpiresAt: now + ttlMs}
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() error {
			token, granted, err := c.queryInt64(sqlAcquireLease, executionID, owner, l.ExpiresAt, now)
			if err != nil || granted {
				l.Token = token
				return err
			}
			return leaseHolder(c, executionID)
		})
	})
	if err != nil {
		return store.Lease{}, err
	}
	return l, nil
}

// leaseHolder returns the *store.LeaseHeldError of the live lease that
// refused an Acquire of executionID.
func leaseHolder(c *rawConn, executionID string) error {
	row, found, err := c.queryRow(sqlLeaseHolder, executionID)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("sqlite: lease of %q refused but not found", executionID)
	}
	owner, okOwner := row[0].(string)
	expires, okExpires := row[1].(int64)
	if !okOwner || !okExpires {
		return fmt.Errorf("sqlite: lease of %q holds owner %T and expiry %T", executionID, row[0], row[1])
	}
	return &store.LeaseHeldError{ExecutionID: executionID, Owner: owner, ExpiresAt: expires}
}

// Renew implements store.LeaseStore: iff the stored lease of l.ExecutionID
// has l's Owner and Token it sets ExpiresAt to now+ttlMs (whether that is
// later or earlier than before), durably, and returns the lease, token
// unchanged. A lease that expired but was not taken over is still its
// owner's, so its Renew succeeds. A lease released, re-acquired (a newer
// token) or taken by another owner returns store.ErrLeaseLost, changing
// nothing. Invalid input is refused as by Acquire.
func (s *LeaseStore) Renew(ctx context.Context, l store.Lease, now, ttlMs int64) (store.Lease, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateLeaseGrant(l.ExecutionID, l.Owner, now, ttlMs); err != nil {
		return store.Lease{}, err
	}
	l.ExpiresAt = now + ttlMs
	n, err := s.update(ctx, sqlRenewLease, l.ExpiresAt, l.ExecutionID, l.Owner, l.Token)
	if err != nil {
		return store.Lease{}, err
	}
	if n == 0 {
		return store.Lease{}, store.ErrLeaseLost
	}
	return l, nil
}

// Release implements store.LeaseStore: iff the stored lease of
// l.ExecutionID has l's Owner and Token it clears the owner, durably,
// keeping the token so the next Acquire still grants a greater one. A
// lease already lost (released, re-acquired, taken over or never granted)
// is left as it is and nil returned. An execution id or owner that
// event.ValidateID refuses is refused with its *event.InvalidEnvelopeError.
func (s *LeaseStore) Release(ctx context.Context, l store.Lease) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := store.ValidateLeaseIDs(l.ExecutionID, l.Owner); err != nil {
		return err
	}
	_, err := s.update(ctx, sqlReleaseLease, l.ExecutionID, l.Owner, l.Token)
	return err
}

// update runs one conditional UPDATE in its own write transaction and
// returns the rows it changed.
func (s *LeaseStore) update(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.db.w.run(ctx, func(c *rawConn) error {
		return c.inTx(func() (err error) {
			n, err = c.exec(q, args...)
			return err
		})
	})
	return n, err
}

// Get implements store.LeaseStore: the lease last granted on executionID,
// expired or not, or false when it was never granted or was released. An
// executionID that event.ValidateID refuses is refused with its
// *event.InvalidEnvelopeError.
func (s *LeaseStore) Get(ctx context.Context, executionID string) (store.Lease, bool, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, false, err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return store.Lease{}, false, err
	}
	l := store.Lease{ExecutionID: executionID}
	err := s.db.reads.lease.QueryRowContext(ctx, executionID).Scan(&l.Owner, &l.Token, &l.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, nil
	}
	if err != nil {
		return store.Lease{}, false, s.db.readErr("get lease", err)
	}
	return l, true, nil
}

// Close implements store.LeaseStore: later calls return store.ErrClosed. A
// store from OpenLeaseStore closes its DB; one from DB.LeaseStore only
// detaches. A second Close returns nil.
func (s *LeaseStore) Close() error { return s.close() }
