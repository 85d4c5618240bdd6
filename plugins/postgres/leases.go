package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// LeaseStore keeps the heartbeat leases of a DB in the leases table, one
// row per execution ever leased, and implements store.LeaseStore: the
// lease that keeps one live driver per execution across every node sharing
// the schema.
//
// Every write is one conditional statement, committed (and, with
// synchronous_commit on, flushed to the WAL) before it returns; a crash
// before the commit leaves the previous lease, after it the new one. The
// statement's write takes the row lock, so of any number of owners racing
// for a free or expired lease, in one process or many, exactly one wins: a
// loser waits for the winner's commit, then READ COMMITTED re-checks the
// condition against the winner's row and finds it held. Get reads the last
// committed lease.
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

// Acquire implements store.LeaseStore: it grants owner the lease of
// executionID until now+ttlMs when the lease is free (never granted, or
// released), expired at now (ExpiresAt <= now), or already owner's, with a
// token one above the execution's previous one, in one conditional upsert
// (a single round trip). When the upsert is refused, Acquire runs it again
// in a transaction, where a refusal still locks the row, and reads the
// holder under that lock: the *store.LeaseHeldError it returns names the
// live holder and its expiry as they stand, and the transaction is rolled
// back, so nothing changes. (If the lease came free in between, the second
// upsert grants it.) Before anything is written it refuses, with an
// *event.InvalidEnvelopeError, an executionID or owner that
// event.ValidateID refuses, a ttlMs below 1 and a now+ttlMs past
// math.MaxInt64. A ctx that ends before the statement is sent writes
// nothing; one that ends while it runs leaves the grant unknown (Get tells;
// an unknown grant simply expires).
func (s *LeaseStore) Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (store.Lease, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateLeaseGrant(executionID, owner, now, ttlMs); err != nil {
		return store.Lease{}, err
	}
	l := store.Lease{ExecutionID: executionID, Owner: owner, ExpiresAt: now + ttlMs}
	err := s.db.pool.QueryRow(ctx, s.db.q.leaseAcquire, executionID, owner, l.ExpiresAt, now).Scan(&l.Token)
	if errors.Is(err, pgx.ErrNoRows) {
		err = inTx(ctx, s.db.pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, s.db.q.leaseAcquire, executionID, owner, l.ExpiresAt, now).Scan(&l.Token)
			if errors.Is(err, pgx.ErrNoRows) {
				return s.holder(ctx, tx, executionID)
			}
			return err
		})
	}
	var held *store.LeaseHeldError
	switch {
	case errors.As(err, &held):
		return store.Lease{}, err
	case err != nil:
		return store.Lease{}, s.readErr("acquire lease", err)
	}
	return l, nil
}

// holder returns the *store.LeaseHeldError of the live lease that refused
// an Acquire of executionID inside tx, whose refused upsert holds the row
// lock.
func (s *LeaseStore) holder(ctx context.Context, tx pgx.Tx, executionID string) error {
	held := &store.LeaseHeldError{ExecutionID: executionID}
	var owner *string
	err := tx.QueryRow(ctx, s.db.q.leaseHolder, executionID).Scan(&owner, &held.ExpiresAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && owner == nil:
		return fmt.Errorf("postgres: lease of %q refused but not held", executionID)
	case err != nil:
		return err
	}
	held.Owner = *owner
	return held
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
	tag, err := s.db.pool.Exec(ctx, s.db.q.leaseRenew, l.ExpiresAt, l.ExecutionID, l.Owner, l.Token)
	if err != nil {
		return store.Lease{}, s.readErr("renew lease", err)
	}
	if tag.RowsAffected() == 0 {
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
	if _, err := s.db.pool.Exec(ctx, s.db.q.leaseRelease, l.ExecutionID, l.Owner, l.Token); err != nil {
		return s.readErr("release lease", err)
	}
	return nil
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
	err := s.db.pool.QueryRow(ctx, s.db.q.leaseGet, executionID).Scan(&l.Owner, &l.Token, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, false, nil
	}
	if err != nil {
		return store.Lease{}, false, s.readErr("get lease", err)
	}
	return l, true, nil
}

// Close implements store.LeaseStore: later calls return store.ErrClosed. A
// store from OpenLeaseStore closes its DB; one from DB.LeaseStore only
// detaches. A second Close returns nil.
func (s *LeaseStore) Close() error { return s.close() }
