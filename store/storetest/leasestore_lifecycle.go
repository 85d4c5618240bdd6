package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Sizes of the race subtest: leaseContenders owners race for one lease in
// each of leaseRounds rounds.
const (
	leaseContenders = 32
	leaseRounds     = 16
)

// badLeaseIDs are execution ids and owners event.ValidateID refuses.
var badLeaseIDs = []string{"", "a\x00b", "line\nbreak", "tab\tkey", "bad\xff", strings.Repeat("x", event.MaxIDBytes+1)}

// invalidInput: Acquire, Renew, Release and Get refuse, with
// *event.InvalidEnvelopeError, an execution id or owner that
// event.ValidateID refuses; Acquire and Renew also refuse a ttlMs below 1
// and a now+ttlMs past math.MaxInt64. A refusal changes nothing: the lease
// already held reads back the same and still renews. The longest valid id
// and owner, and an expiry of exactly math.MaxInt64, are accepted.
func (k leaseKit) invalidInput(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	cur := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	refused := func(what string, err error) {
		t.Helper()
		var ie *event.InvalidEnvelopeError
		if !errors.As(err, &ie) {
			t.Fatalf("%s = %v, want an *event.InvalidEnvelopeError", what, err)
		}
		expectLease(t, s, "exec-1", &cur)
	}
	for _, bad := range badLeaseIDs {
		_, err := s.Acquire(ctx, bad, "node-a", 100, leaseTTL)
		refused(fmt.Sprintf("Acquire(execution %q)", bad), err)
		_, err = s.Acquire(ctx, "exec-1", bad, 100, leaseTTL)
		refused(fmt.Sprintf("Acquire(owner %q)", bad), err)
		badExec, badOwner := cur, cur
		badExec.ExecutionID, badOwner.Owner = bad, bad
		_, err = s.Renew(ctx, badExec, 100, leaseTTL)
		refused(fmt.Sprintf("Renew(execution %q)", bad), err)
		_, err = s.Renew(ctx, badOwner, 100, leaseTTL)
		refused(fmt.Sprintf("Renew(owner %q)", bad), err)
		refused(fmt.Sprintf("Release(execution %q)", bad), s.Release(ctx, badExec))
		refused(fmt.Sprintf("Release(owner %q)", bad), s.Release(ctx, badOwner))
		_, _, err = s.Get(ctx, bad)
		refused(fmt.Sprintf("Get(%q)", bad), err)
	}
	for _, c := range []struct{ now, ttl int64 }{
		{100, 0}, {100, -1}, {100, math.MinInt64}, {math.MaxInt64, 1}, {math.MaxInt64 - 5, 6}, {1, math.MaxInt64},
	} {
		_, err := s.Acquire(ctx, "exec-1", "node-a", c.now, c.ttl)
		refused(fmt.Sprintf("Acquire(now %d, ttl %d)", c.now, c.ttl), err)
		_, err = s.Acquire(ctx, "exec-fresh", "node-a", c.now, c.ttl)
		refused(fmt.Sprintf("Acquire(fresh, now %d, ttl %d)", c.now, c.ttl), err)
		_, err = s.Renew(ctx, cur, c.now, c.ttl)
		refused(fmt.Sprintf("Renew(now %d, ttl %d)", c.now, c.ttl), err)
	}
	expectLease(t, s, "exec-fresh", nil)
	longest := strings.Repeat("x", event.MaxIDBytes)
	mustAcquire(t, s, longest, longest, math.MaxInt64-leaseTTL, leaseTTL, minToken)
	mustRenew(t, s, cur, math.MaxInt64-1, 1)
}

// concurrentAcquire: in each of 16 rounds, 32 owners call Acquire on one
// execution at once with the same now, when the lease is free (released in
// the round before) or just expired (at now). Exactly one wins; every other
// is refused with a *store.LeaseHeldError naming the winner, and then sees
// the winner's lease in Get. The winners' tokens strictly increase.
func (k leaseKit) concurrentAcquire(t *testing.T) {
	s := k.open(t)
	prev := int64(minToken)
	for r := range int64(leaseRounds) {
		now := 10_000 + r*leaseTTL // the last round's lease expires at this now
		winner, ok := raceAcquire(t, s, now)
		if !ok {
			return
		}
		if winner.Token <= prev {
			t.Fatalf("round %d: winner's token %d is not above the previous %d", r, winner.Token, prev)
		}
		prev = winner.Token
		expectLease(t, s, "exec-raced", &winner)
		if r%2 == 1 {
			mustRelease(t, s, winner)
		}
	}
}

// raceAcquire runs one round of concurrentAcquire and returns its winner,
// or false after reporting a failure.
func raceAcquire(t *testing.T, s store.LeaseStore, now int64) (store.Lease, bool) {
	t.Helper()
	ctx := context.Background()
	type outcome struct {
		l   store.Lease
		err error
	}
	out := make([]outcome, leaseContenders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range leaseContenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := s.Acquire(ctx, "exec-raced", fmt.Sprintf("node-%02d", w), now, leaseTTL)
			out[w] = outcome{l, err}
			var he *store.LeaseHeldError
			if errors.As(err, &he) {
				if got, found, gerr := s.Get(ctx, "exec-raced"); gerr != nil || !found || got.Owner != he.Owner {
					t.Errorf("node-%02d refused by %q, then Get = %s, %v, %v", w, he.Owner, describeLease(got), found, gerr)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	var winners []store.Lease
	for _, o := range out {
		if o.err == nil {
			winners = append(winners, o.l)
		}
	}
	if len(winners) != 1 {
		t.Errorf("at now %d, %d of %d owners were granted the lease, want exactly 1", now, len(winners), leaseContenders)
		return store.Lease{}, false
	}
	w := winners[0]
	for i, o := range out {
		var he *store.LeaseHeldError
		switch {
		case o.err == nil:
		case !errors.As(o.err, &he):
			t.Errorf("at now %d, node-%02d got %v, want a *store.LeaseHeldError", now, i, o.err)
		case he.Owner != w.Owner || he.ExpiresAt != w.ExpiresAt || he.ExecutionID != w.ExecutionID:
			t.Errorf("at now %d, node-%02d was refused with %+v, want it to name %s", now, i, *he, describeLease(w))
		}
	}
	if w.Owner == "" || w.ExpiresAt != now+leaseTTL {
		t.Errorf("at now %d, the winner's lease is %s", now, describeLease(w))
	}
	return w, !t.Failed()
}

// closed: after Close every method returns store.ErrClosed.
func (k leaseKit) closed(t *testing.T) {
	s := k.open(t)
	l := mustAcquire(t, s, "exec-1", "node-a", 100, leaseTTL, minToken)
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	_, err := s.Acquire(ctx, "exec-2", "node-a", 100, leaseTTL)
	check("Acquire", err)
	_, err = s.Renew(ctx, l, 200, leaseTTL)
	check("Renew", err)
	check("Release", s.Release(ctx, l))
	_, _, err = s.Get(ctx, "exec-1")
	check("Get", err)
}

// reopen: leases survive a close and a reopen — held ones with their
// owner, token and expiry, released ones free — and so do token counters:
// the next grant of every execution, released ones included, outranks the
// tokens granted before; a lease from before the reopen still renews, and
// a stale one is still lost.
func (k leaseKit) reopen(t *testing.T) {
	s := k.open(t)
	stale := mustAcquire(t, s, "held", "node-a", 100, leaseTTL, minToken)
	held := mustAcquire(t, s, "held", "node-a", 100, leaseTTL, stale.Token)
	freed := mustAcquire(t, s, "released", "node-a", 100, leaseTTL, minToken)
	mustRelease(t, s, freed)
	old := mustAcquire(t, s, "taken", "node-a", 100, leaseTTL, minToken)
	taken := mustAcquire(t, s, "taken", "node-b", old.ExpiresAt, leaseTTL, old.Token)
	bulk := make([]store.Lease, 20)
	for i := range bulk {
		bulk[i] = mustAcquire(t, s, fmt.Sprintf("bulk-%02d", i), fmt.Sprintf("node-%d", i%3), int64(i), leaseTTL, minToken)
	}
	closeStore(t, s)
	s = openStore(t, "LeaseStoreFactory.Reopen", func(t *testing.T) store.LeaseStore { return k.f.Reopen(t, s) })
	expectLease(t, s, "held", &held)
	expectLease(t, s, "released", nil)
	expectLease(t, s, "taken", &taken)
	for i := range bulk {
		expectLease(t, s, bulk[i].ExecutionID, &bulk[i])
	}
	expectHeld(t, s, "held", "node-b", 200, held)
	expectLost(t, s, stale, 200)
	expectLost(t, s, old, 200)
	held = mustRenew(t, s, held, 200, leaseTTL)
	mustAcquire(t, s, "released", "node-b", 200, leaseTTL, freed.Token)
	mustAcquire(t, s, "held", "node-a", 300, leaseTTL, held.Token)
	mustAcquire(t, s, "taken", "node-c", taken.ExpiresAt, leaseTTL, taken.Token)
}
