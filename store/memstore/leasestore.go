package memstore

import (
	"context"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

var _ store.LeaseStore = (*LeaseStore)(nil)

// LeaseStore is the in-memory store.LeaseStore; build one with
// NewLeaseStore. It is safe for concurrent use: every method holds one
// mutex, so an Acquire decides and grants atomically and, of any number of
// owners racing for a free or expired lease, exactly one wins.
//
// Tokens are per execution and only ever grow: every grant, a
// re-acquisition by the holder included, takes the previous token plus one
// (the first grant takes 1), and a Release keeps the execution's token, so
// the next grant still outranks every lease handed out before. The store
// therefore remembers one small entry for every execution ever leased, until
// Close drops them all.
type LeaseStore struct {
	mu     sync.Mutex
	closed bool
	// byExec holds the last lease granted per execution; Owner is "" once
	// it was released (Token and ExpiresAt are kept).
	byExec map[string]store.Lease
}

// NewLeaseStore returns an empty in-memory lease store.
func NewLeaseStore() *LeaseStore {
	return &LeaseStore{byExec: make(map[string]store.Lease)}
}

// Acquire implements store.LeaseStore: it grants owner the lease of
// executionID until now+ttlMs when the lease is free (never granted, or
// released), expired at now (ExpiresAt <= now), or already owner's, with a
// token one above the execution's previous one. Otherwise it returns a
// *store.LeaseHeldError naming the live holder and its expiry, changing
// nothing. It refuses first, with an *event.InvalidEnvelopeError, an
// executionID or owner that event.ValidateID refuses, a ttlMs below 1 and a
// now+ttlMs past math.MaxInt64. A closed store returns store.ErrClosed.
func (s *LeaseStore) Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateLeaseGrant(executionID, owner, now, ttlMs); err != nil {
		return store.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Lease{}, store.ErrClosed
	}
	cur := s.byExec[executionID] // the zero Lease when never granted
	if cur.Owner != "" && cur.Owner != owner && cur.ExpiresAt > now {
		return store.Lease{}, &store.LeaseHeldError{ExecutionID: executionID, Owner: cur.Owner, ExpiresAt: cur.ExpiresAt}
	}
	l := store.Lease{ExecutionID: executionID, Owner: owner, Token: cur.Token + 1, ExpiresAt: now + ttlMs}
	s.byExec[executionID] = l
	return l, nil
}

// Renew implements store.LeaseStore: iff the stored lease of l.ExecutionID
// has l's Owner and Token it sets ExpiresAt to now+ttlMs (whether that is
// later or earlier than before) and returns the lease, token unchanged.
// A lease that expired but was not taken over is still its owner's, so its
// Renew succeeds. A lease released, re-acquired (a newer token) or taken by
// another owner returns store.ErrLeaseLost, changing nothing. Invalid input
// is refused as by Acquire; a closed store returns store.ErrClosed.
func (s *LeaseStore) Renew(ctx context.Context, l store.Lease, now, ttlMs int64) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, err
	}
	if err := store.ValidateLeaseGrant(l.ExecutionID, l.Owner, now, ttlMs); err != nil {
		return store.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Lease{}, store.ErrClosed
	}
	cur, ok := s.byExec[l.ExecutionID]
	if !ok || cur.Owner != l.Owner || cur.Token != l.Token {
		return store.Lease{}, store.ErrLeaseLost
	}
	cur.ExpiresAt = now + ttlMs
	s.byExec[l.ExecutionID] = cur
	return cur, nil
}

// Release implements store.LeaseStore: iff the stored lease of
// l.ExecutionID has l's Owner and Token it frees the lease, keeping the
// token so the next Acquire still grants a greater one. A lease already
// lost (released, re-acquired, taken over or never granted) is left as it
// is and nil returned. An execution id or owner that event.ValidateID
// refuses is refused with its *event.InvalidEnvelopeError; a closed store
// returns store.ErrClosed.
func (s *LeaseStore) Release(ctx context.Context, l store.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateLeaseIDs(l.ExecutionID, l.Owner); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	cur, ok := s.byExec[l.ExecutionID]
	if ok && cur.Owner == l.Owner && cur.Token == l.Token {
		cur.Owner = ""
		s.byExec[l.ExecutionID] = cur
	}
	return nil
}

// Get implements store.LeaseStore: the lease last granted on executionID,
// expired or not, or false when it was never granted or was released. An
// executionID that event.ValidateID refuses is refused with its
// *event.InvalidEnvelopeError; a closed store returns store.ErrClosed.
func (s *LeaseStore) Get(ctx context.Context, executionID string) (store.Lease, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, false, err
	}
	if err := event.ValidateID("executionId", executionID); err != nil {
		return store.Lease{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Lease{}, false, store.ErrClosed
	}
	cur, ok := s.byExec[executionID]
	if !ok || cur.Owner == "" {
		return store.Lease{}, false, nil
	}
	return cur, true, nil
}

// Close marks the store closed and drops its leases and token counters.
// The first Close returns nil; every later call of any method returns
// store.ErrClosed.
func (s *LeaseStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.byExec = nil
	return nil
}
