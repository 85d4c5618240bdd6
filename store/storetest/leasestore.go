package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// LeaseStoreFactory builds the stores RunLeaseStore checks.
type LeaseStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it. It is called once
	// per subtest and may call t.Fatal (t.TempDir is the place for files).
	New func(t *testing.T) store.LeaseStore
	// Reopen is optional: it reopens the durable storage behind a store New
	// returned, after the kit closed it. When nil the Reopen subtest is left
	// out.
	Reopen func(t *testing.T, closed store.LeaseStore) store.LeaseStore
}

// leaseKit carries the factory through the LeaseStore subtests.
type leaseKit struct{ f LeaseStoreFactory }

// RunLeaseStore runs the LeaseStore conformance kit against the stores f
// builds, one fresh store per named subtest: acquiring a free lease,
// re-acquisition by the holder (a greater token, a new expiry), refusal of
// another owner with a *store.LeaseHeldError naming the holder and changing
// nothing, takeover at expiry (ExpiresAt <= now) with a greater token,
// Renew (a new expiry, the same token, also for an expired lease not taken
// over), Renew of a lost lease (stale token, other owner, released, taken
// over, never granted) returning store.ErrLeaseLost, Release (the token
// counter survives it) and a Release of a lost lease changing nothing,
// independent executions, refused input (an *event.InvalidEnvelopeError for
// ids and owners event.ValidateID refuses, a ttlMs below 1 or a now+ttlMs
// past math.MaxInt64, changing nothing), 32 owners racing for one lease over
// 16 rounds (exactly one wins each round, tokens strictly increase), Close,
// and Reopen when f.Reopen is set.
//
// The kit asks only that tokens of an execution strictly increase across
// grants, never that they step by one or start anywhere in particular.
func RunLeaseStore(t *testing.T, f LeaseStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: LeaseStoreFactory.New is nil")
	}
	k := leaseKit{f: f}
	t.Run("AcquireFree", k.acquireFree)
	t.Run("ReacquireByOwner", k.reacquireByOwner)
	t.Run("HeldByAnother", k.heldByAnother)
	t.Run("ExpiryTakeover", k.expiryTakeover)
	t.Run("Renew", k.renew)
	t.Run("RenewLost", k.renewLost)
	t.Run("ReleaseThenAcquire", k.releaseThenAcquire)
	t.Run("ReleaseMismatch", k.releaseMismatch)
	t.Run("IndependentExecutions", k.independentExecutions)
	t.Run("InvalidInput", k.invalidInput)
	t.Run("ConcurrentAcquire", k.concurrentAcquire)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: LeaseStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// leaseTTL is the lease length the kit uses, in milliseconds.
const leaseTTL = 1_000

// open returns a fresh store for one subtest.
func (k leaseKit) open(t *testing.T) store.LeaseStore {
	t.Helper()
	return openStore(t, "LeaseStoreFactory.New", k.f.New)
}

// describeLease renders a lease for failure messages.
func describeLease(l store.Lease) string {
	return "{" + strconv.Quote(l.ExecutionID) + " owner " + strconv.Quote(l.Owner) + " token " +
		itoa(l.Token) + " until " + itoa(l.ExpiresAt) + "}"
}

// mustAcquire acquires and requires a grant to owner until now+ttl with a
// token above after (pass the previous token of the execution, or
// math.MinInt64 for none); Get must then return the same lease.
func mustAcquire(t *testing.T, s store.LeaseStore, exec, owner string, now, ttl, after int64) store.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), exec, owner, now, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q, now %d, ttl %d): %v", exec, owner, now, ttl, err)
	}
	if l.ExecutionID != exec || l.Owner != owner || l.ExpiresAt != now+ttl {
		t.Fatalf("Acquire(%q, %q, now %d, ttl %d) = %s, want that owner until %d", exec, owner, now, ttl,
			describeLease(l), now+ttl)
	}
	if l.Token <= after {
		t.Fatalf("Acquire(%q, %q, now %d) granted token %d, not above the previous %d", exec, owner, now, l.Token, after)
	}
	expectLease(t, s, exec, &l)
	return l
}

// expectHeld requires Acquire to be refused with a *store.LeaseHeldError
// naming held, and the stored lease to still be held.
func expectHeld(t *testing.T, s store.LeaseStore, exec, owner string, now int64, held store.Lease) {
	t.Helper()
	_, err := s.Acquire(context.Background(), exec, owner, now, leaseTTL)
	var he *store.LeaseHeldError
	switch {
	case !errors.As(err, &he):
		t.Fatalf("Acquire(%q, %q, now %d) = %v, want a *store.LeaseHeldError", exec, owner, now, err)
	case !errors.Is(err, store.ErrLeaseHeld):
		t.Fatalf("Acquire(%q, %q, now %d) = %v, which is not store.ErrLeaseHeld", exec, owner, now, err)
	case he.ExecutionID != exec || he.Owner != held.Owner || he.ExpiresAt != held.ExpiresAt:
		t.Fatalf("Acquire(%q, %q, now %d) refused with %+v, want it to name %s", exec, owner, now, *he, describeLease(held))
	}
	expectLease(t, s, exec, &held)
}

// expectLease gets exec and requires it to equal *want, or to be missing
// when want is nil.
func expectLease(t *testing.T, s store.LeaseStore, exec string, want *store.Lease) {
	t.Helper()
	got, found, err := s.Get(context.Background(), exec)
	switch {
	case err != nil:
		t.Fatalf("Get(%q): %v", exec, err)
	case want == nil && found:
		t.Fatalf("Get(%q) found %s, want none", exec, describeLease(got))
	case want == nil:
	case !found:
		t.Fatalf("Get(%q) found nothing, want %s", exec, describeLease(*want))
	case got != *want:
		t.Fatalf("Get(%q) = %s, want %s", exec, describeLease(got), describeLease(*want))
	}
}

// mustRenew renews l and requires the same token until now+ttl.
func mustRenew(t *testing.T, s store.LeaseStore, l store.Lease, now, ttl int64) store.Lease {
	t.Helper()
	got, err := s.Renew(context.Background(), l, now, ttl)
	if err != nil {
		t.Fatalf("Renew(%s, now %d, ttl %d): %v", describeLease(l), now, ttl, err)
	}
	want := l
	want.ExpiresAt = now + ttl
	if got != want {
		t.Fatalf("Renew(%s, now %d, ttl %d) = %s, want %s", describeLease(l), now, ttl, describeLease(got), describeLease(want))
	}
	expectLease(t, s, l.ExecutionID, &want)
	return got
}

// expectLost requires Renew of l to return store.ErrLeaseLost.
func expectLost(t *testing.T, s store.LeaseStore, l store.Lease, now int64) {
	t.Helper()
	if _, err := s.Renew(context.Background(), l, now, leaseTTL); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew(%s, now %d) = %v, want store.ErrLeaseLost", describeLease(l), now, err)
	}
}

// mustRelease releases l and requires nil.
func mustRelease(t *testing.T, s store.LeaseStore, l store.Lease) {
	t.Helper()
	if err := s.Release(context.Background(), l); err != nil {
		t.Fatalf("Release(%s): %v", describeLease(l), err)
	}
}

// acquireFree: a never-leased execution is granted to the first owner,
// Get returns the lease, and other executions stay unleased.
func (k leaseKit) acquireFree(t *testing.T) {
	s := k.open(t)
	expectLease(t, s, "exec-1", nil)
	l := mustAcquire(t, s, "exec-1", "node-a", 1_700_000_000_000, 30_000, minToken)
	expectLease(t, s, "exec-1", &l)
	for _, exec := range []string{"exec-2", "Exec-1", "exec-", "exec-1/x"} {
		expectLease(t, s, exec, nil)
	}
	mustAcquire(t, s, "sched/é日本", "node/é", -5, 1, minToken)
}

// minToken is below every token, for a first grant.
const minToken = -1 << 63

// reacquireByOwner: the holder acquiring again, before or after expiry,
// gets a greater token and the new expiry (even an earlier one); its old
// lease is then stale.
func (k leaseKit) reacquireByOwner(t *testing.T) {
	s := k.open(t)
	l1 := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	l2 := mustAcquire(t, s, "exec-1", "node-a", 200, leaseTTL, l1.Token)
	l3 := mustAcquire(t, s, "exec-1", "node-a", 250, 10, l2.Token)
	l4 := mustAcquire(t, s, "exec-1", "node-a", 5_000, leaseTTL, l3.Token)
	expectLost(t, s, l1, 300)
	expectLost(t, s, l3, 300)
	expectLease(t, s, "exec-1", &l4)
}

// heldByAnother: another owner is refused while the lease is live (up to
// one millisecond before ExpiresAt), with a *store.LeaseHeldError naming
// the holder and its expiry, and nothing changes: the holder still renews
// with its token.
func (k leaseKit) heldByAnother(t *testing.T) {
	s := k.open(t)
	l := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	for _, now := range []int64{0, 100, 600, l.ExpiresAt - 1} {
		expectHeld(t, s, "exec-1", "node-b", now, l)
	}
	expectHeld(t, s, "exec-1", "Node-a", 101, l)
	mustRenew(t, s, l, 200, leaseTTL)
}

// expiryTakeover: at ExpiresAt (the bound is inclusive) or later another
// owner takes the lease with a greater token; the old holder's Renew is
// then lost, its Acquire refused naming the new holder, and its Release
// changes nothing.
func (k leaseKit) expiryTakeover(t *testing.T) {
	s := k.open(t)
	old := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	taken := mustAcquire(t, s, "exec-1", "node-b", old.ExpiresAt, leaseTTL, old.Token)
	expectLost(t, s, old, old.ExpiresAt)
	expectHeld(t, s, "exec-1", "node-a", old.ExpiresAt+1, taken)
	mustRelease(t, s, old)
	expectLease(t, s, "exec-1", &taken)
	later := mustAcquire(t, s, "exec-1", "node-c", taken.ExpiresAt+50_000, leaseTTL, taken.Token)
	expectLost(t, s, taken, later.ExpiresAt-1)
}

// renew: Renew sets ExpiresAt to now+ttl and keeps the token, so the lease
// stays refused to others until the new expiry; a lease that expired but
// was not taken over still renews.
func (k leaseKit) renew(t *testing.T) {
	s := k.open(t)
	l := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	l = mustRenew(t, s, l, 900, leaseTTL)
	expectHeld(t, s, "exec-1", "node-b", 1_899, l)
	l = mustRenew(t, s, l, 5_000, leaseTTL) // expired at 1,900, not taken
	expectHeld(t, s, "exec-1", "node-b", 5_999, l)
	l = mustRenew(t, s, l, 5_100, 1) // a shorter lease
	next := mustAcquire(t, s, "exec-1", "node-b", 5_101, leaseTTL, l.Token)
	expectLost(t, s, l, 5_101)
	expectLease(t, s, "exec-1", &next)
}

// renewLost: Renew with a stale token, another owner, after a Release, or
// on a never-leased execution returns store.ErrLeaseLost and changes
// nothing.
func (k leaseKit) renewLost(t *testing.T) {
	s := k.open(t)
	old := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	cur := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, old.Token)
	expectLost(t, s, old, 200)
	other := cur
	other.Owner = "node-b"
	expectLost(t, s, other, 200)
	future := cur
	future.Token++
	expectLost(t, s, future, 200)
	expectLease(t, s, "exec-1", &cur)
	expectLost(t, s, store.Lease{ExecutionID: "exec-2", Owner: "node-a", Token: cur.Token, ExpiresAt: 1}, 200)
	expectLease(t, s, "exec-2", nil)
	mustRelease(t, s, cur)
	expectLost(t, s, cur, 200)
	expectLease(t, s, "exec-1", nil)
}

// releaseThenAcquire: a released lease is gone from Get, is free to any
// owner at once (before its expiry) and is granted with a greater token
// than before; releasing it twice is not an error.
func (k leaseKit) releaseThenAcquire(t *testing.T) {
	s := k.open(t)
	a := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	mustRelease(t, s, a)
	expectLease(t, s, "exec-1", nil)
	mustRelease(t, s, a)
	b := mustAcquire(t, s, "exec-1", "node-b", 101, leaseTTL, a.Token)
	mustRelease(t, s, b)
	a2 := mustAcquire(t, s, "exec-1", "node-a", 102, leaseTTL, b.Token)
	expectHeld(t, s, "exec-1", "node-b", 103, a2)
}

// releaseMismatch: a Release with a stale or future token, another owner,
// or of a never-leased execution returns nil and changes nothing.
func (k leaseKit) releaseMismatch(t *testing.T) {
	s := k.open(t)
	old := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	cur := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, old.Token)
	other, future := cur, cur
	other.Owner = "node-b"
	future.Token++
	for _, l := range []store.Lease{old, other, future} {
		mustRelease(t, s, l)
		expectLease(t, s, "exec-1", &cur)
	}
	mustRelease(t, s, store.Lease{ExecutionID: "exec-2", Owner: "node-a", Token: 1, ExpiresAt: 1})
	expectLease(t, s, "exec-2", nil)
	mustRenew(t, s, cur, 200, leaseTTL)
}

// independentExecutions: leases of different executions do not interact:
// two owners hold one each, and releasing one leaves the other.
func (k leaseKit) independentExecutions(t *testing.T) {
	s := k.open(t)
	a := mustAcquire(t, s, "exec-a", "node-a", 100, leaseTTL, minToken)
	b := mustAcquire(t, s, "exec-b", "node-b", 100, leaseTTL, minToken)
	a2 := mustAcquire(t, s, "exec-b2", "node-a", 100, leaseTTL, minToken)
	expectHeld(t, s, "exec-a", "node-b", 200, a)
	expectHeld(t, s, "exec-b", "node-a", 200, b)
	mustRelease(t, s, a)
	expectLease(t, s, "exec-b", &b)
	expectLease(t, s, "exec-b2", &a2)
	mustRenew(t, s, b, 300, leaseTTL)
}
