package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// Sizes of the timer-claim subtests.
const (
	timerClaimTTL   = 50
	timerClaimers   = 8
	claimRaceTimers = 60
	claimRaceLimit  = 4
	claimRaceNow    = 1_000
	claimerRounds   = 2 * claimRaceTimers // a claimer running longer has hung
)

// timerClaimKit carries the factory through the TimerClaimer subtests.
type timerClaimKit struct{ f TimerStoreFactory }

// RunTimerClaims runs the store.TimerClaimer conformance kit against the
// timer stores f builds (f.Reopen is not used), one fresh store per named
// subtest; a store that is not a store.TimerClaimer fails it. It checks
// that owners claiming at one now get disjoint timers; that a claimed
// timer is handed to nobody (its owner included) until now >=
// claimedAt+ttl, and then to anyone; that Delete removes a claimed timer
// and Put under its key replaces it and ends the claim; that timers not yet
// due are never claimed; the (WakeAt, Key) order and the limit (below 1 the
// store's default); that the timer comes back whole; that 8 goroutines
// claiming at once never get one (Key, WakeAt) twice within a claim; and
// Close. Due keeps its own contract and may still list claimed timers: the
// kit does not look.
func RunTimerClaims(t *testing.T, f TimerStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: TimerStoreFactory.New is nil")
	}
	k := timerClaimKit{f: f}
	t.Run("OwnersGetDisjointTimers", k.disjoint)
	t.Run("ClaimedTimerHiddenUntilExpiry", k.hiddenUntilExpiry)
	t.Run("DeleteRemovesClaimedTimer", k.deleteClaimed)
	t.Run("PutReplacesAndEndsClaim", k.putEndsClaim)
	t.Run("NotDueNeverClaimed", k.notDue)
	t.Run("ClaimOrderWakeAtThenKey", k.order)
	t.Run("ClaimLimitBounds", k.limit)
	t.Run("ClaimReturnsWholeTimer", k.whole)
	t.Run("ConcurrentClaimsAreDisjoint", k.concurrent)
	t.Run("Closed", k.closed)
}

// open returns a fresh store for one subtest, as a TimerClaimer too.
func (k timerClaimKit) open(t *testing.T) (store.TimerStore, store.TimerClaimer) {
	t.Helper()
	s := openStore(t, "TimerStoreFactory.New", k.f.New)
	c, ok := s.(store.TimerClaimer)
	if !ok {
		t.Fatalf("storetest: %T is not a store.TimerClaimer", s)
	}
	return s, c
}

// claimDue calls ClaimDue and fails the test on an error; it also checks
// that the timers are due, in (WakeAt, Key) order, and no more than limit
// (when limit > 0).
func claimDue(t *testing.T, c store.TimerClaimer, owner string, now, ttl int64, limit int) []store.Timer {
	t.Helper()
	got, err := c.ClaimDue(context.Background(), owner, now, ttl, limit)
	if err != nil {
		t.Fatalf("ClaimDue(%q, %d, %d, %d): %v", owner, now, ttl, limit, err)
	}
	if err := checkClaimedTimers(now, limit, got); err != nil {
		t.Fatalf("ClaimDue(%q, %d, %d, %d): %v", owner, now, ttl, limit, err)
	}
	return got
}

// checkClaimedTimers returns what is wrong with got as ClaimDue's answer.
func checkClaimedTimers(now int64, limit int, got []store.Timer) error {
	if limit > 0 && len(got) > limit {
		return fmt.Errorf("returned %d timers, above the limit", len(got))
	}
	for i, tm := range got {
		if tm.WakeAt > now {
			return fmt.Errorf("returned %s, which is not due", describeTimer(tm))
		}
		if i > 0 && !timerBefore(got[i-1], tm) {
			return fmt.Errorf("returned %s before %s", describeTimer(got[i-1]), describeTimer(tm))
		}
	}
	return nil
}

// expectClaimedTimers requires ClaimDue to return exactly want, in order.
func expectClaimedTimers(t *testing.T, c store.TimerClaimer, owner string, now int64, limit int, want ...store.Timer) {
	t.Helper()
	got := claimDue(t, c, owner, now, timerClaimTTL, limit)
	if len(got) != len(want) {
		t.Fatalf("ClaimDue(%q, %d, limit %d) = %q, want %q", owner, now, limit, timerKeys(got), timerKeys(want))
	}
	for i := range got {
		if !sameTimer(got[i], want[i]) {
			t.Fatalf("ClaimDue(%q, %d)[%d] = %s, want %s", owner, now, i, describeTimer(got[i]), describeTimer(want[i]))
		}
	}
}

// disjoint: owners claiming at the same now get disjoint timers, in order,
// until none is left.
func (k timerClaimKit) disjoint(t *testing.T) {
	s, c := k.open(t)
	var all []store.Timer
	for i := range 7 {
		all = append(all, timerAt(fmt.Sprintf("t%d", i), int64(10+i)))
	}
	mustPut(t, s, all...)
	expectClaimedTimers(t, c, "a", 100, 3, all[:3]...)
	expectClaimedTimers(t, c, "b", 100, 3, all[3:6]...)
	expectClaimedTimers(t, c, "a", 100, 3, all[6:]...)
	expectClaimedTimers(t, c, "c", 100, 3)
}

// hiddenUntilExpiry: a claimed timer is handed to nobody, its owner
// included, while now < claimedAt+ttl; from then on to anyone, once.
func (k timerClaimKit) hiddenUntilExpiry(t *testing.T) {
	s, c := k.open(t)
	tm := timerAt("k", 10)
	mustPut(t, s, tm)
	expectClaimedTimers(t, c, "a", 100, 10, tm)
	for _, now := range []int64{100, 101, 100 + timerClaimTTL - 1} {
		expectClaimedTimers(t, c, "a", now, 10)
		expectClaimedTimers(t, c, "b", now, 10)
	}
	expectClaimedTimers(t, c, "b", 100+timerClaimTTL, 10, tm)
	expectClaimedTimers(t, c, "a", 100+timerClaimTTL, 10)
	expectClaimedTimers(t, c, "a", 100+2*timerClaimTTL, 10, tm)
	expectTimer(t, s, "k", &tm)
}

// deleteClaimed: Delete of a claimed timer removes it; it is never claimed
// again, and a timer later put under its key is claimable at once.
func (k timerClaimKit) deleteClaimed(t *testing.T) {
	s, c := k.open(t)
	tm, other := timerAt("k", 10), timerAt("other", 20)
	mustPut(t, s, tm, other)
	expectClaimedTimers(t, c, "a", 100, 1, tm)
	mustDelete(t, s, "k", 10, true)
	expectTimer(t, s, "k", nil)
	expectClaimedTimers(t, c, "b", 100+timerClaimTTL, 10, other)
	again := timerAt("k", 30)
	mustPut(t, s, again)
	expectClaimedTimers(t, c, "b", 101, 10, again)
}

// putEndsClaim: Put under a claimed timer's key replaces it and ends the
// claim, so the new timer is claimable at once once due (also when it is
// put again unchanged); one not yet due waits for its wake time.
func (k timerClaimKit) putEndsClaim(t *testing.T) {
	s, c := k.open(t)
	tm := timerAt("k", 10)
	mustPut(t, s, tm)
	expectClaimedTimers(t, c, "a", 100, 10, tm)
	moved := timerAt("k", 20)
	moved.ExecutionID = "exec-moved"
	mustPut(t, s, moved)
	expectClaimedTimers(t, c, "b", 100, 10, moved)
	expectClaimedTimers(t, c, "a", 100, 10)
	mustPut(t, s, moved)
	expectClaimedTimers(t, c, "a", 101, 10, moved)
	later := timerAt("k", 500)
	mustPut(t, s, later)
	expectClaimedTimers(t, c, "b", 101, 10)
	expectClaimedTimers(t, c, "b", 500, 10, later)
}

// notDue: a timer is never claimed before its WakeAt (the bound is
// inclusive), and claiming the due ones leaves the later ones claimable.
func (k timerClaimKit) notDue(t *testing.T) {
	s, c := k.open(t)
	t100, t200 := timerAt("t100", 100), timerAt("t200", 200)
	mustPut(t, s, t200, t100)
	expectClaimedTimers(t, c, "a", 99, 10)
	expectClaimedTimers(t, c, "a", 180, 10, t100) // claimed until 230
	expectClaimedTimers(t, c, "a", 199, 10)
	expectClaimedTimers(t, c, "b", 200, 10, t200)
}

// order: ClaimDue hands timers out by WakeAt, then Key in code-point
// order, whatever the order they were stored in.
func (k timerClaimKit) order(t *testing.T) {
	s, c := k.open(t)
	want := []store.Timer{
		timerAt("z", 0), timerAt("B", 10), timerAt("a", 10), timerAt("é", 10),
		timerAt("\uff61", 10), timerAt("\U0001d11e", 10), timerAt("0", 30),
	}
	for _, i := range []int{6, 3, 0, 5, 1, 4, 2} {
		mustPut(t, s, want[i])
	}
	expectClaimedTimers(t, c, "a", 30, 2, want[:2]...)
	expectClaimedTimers(t, c, "b", 30, 100, want[2:]...)
}

// limit: ClaimDue returns at most limit timers, the first due ones; a
// limit below 1 is the store's default, which hands out a few rather than
// none.
func (k timerClaimKit) limit(t *testing.T) {
	s, c := k.open(t)
	var all []store.Timer
	for i := range 12 {
		all = append(all, timerAt(fmt.Sprintf("t%02d", i), int64(i/3)))
	}
	mustPut(t, s, all...)
	expectClaimedTimers(t, c, "a", 100, 1, all[:1]...)
	expectClaimedTimers(t, c, "a", 100, 4, all[1:5]...)
	expectClaimedTimers(t, c, "b", 100, 0, all[5:]...)
	for i, limit := range []int{0, -1} {
		now := int64(100 + (1+2*i)*timerClaimTTL) // after every earlier claim expired
		expectClaimedTimers(t, c, "b", now, limit, all...)
		expectClaimedTimers(t, c, "a", now, limit)
	}
}

// whole: ClaimDue returns the timer as stored, execution id and payload
// bytes included, and one without either without them.
func (k timerClaimKit) whole(t *testing.T) {
	s, c := k.open(t)
	full := timerAt("full", 5)
	full.Payload = []byte("{ \"big\" : 12345678901234567890, \"f\":1.0, \"u\":\"é\" }")
	bare := store.Timer{Key: "bare", WakeAt: 5}
	mustPut(t, s, full, bare)
	expectClaimedTimers(t, c, "a", 5, 10, bare, full)
}

// concurrent: 8 goroutines claiming at one now, until nothing is left,
// never get one (Key, WakeAt) twice, and together get every due timer.
func (k timerClaimKit) concurrent(t *testing.T) {
	s, c := k.open(t)
	for i := range claimRaceTimers {
		mustPut(t, s, timerAt(fmt.Sprintf("r%02d", i), int64(i%7)))
	}
	mustPut(t, s, timerAt("later", claimRaceNow+1))
	type claimed struct {
		key    string
		wakeAt int64
	}
	var (
		mu  sync.Mutex
		got = map[claimed]string{} // -> owner
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range timerClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			owner := fmt.Sprintf("owner-%d", w)
			for range claimerRounds {
				page, err := c.ClaimDue(context.Background(), owner, claimRaceNow, timerClaimTTL, claimRaceLimit)
				if err == nil {
					err = checkClaimedTimers(claimRaceNow, claimRaceLimit, page)
				}
				if err != nil {
					t.Errorf("%s: ClaimDue: %v", owner, err)
					return
				}
				if len(page) == 0 {
					return
				}
				mu.Lock()
				for _, tm := range page {
					id := claimed{tm.Key, tm.WakeAt}
					if prev, dup := got[id]; dup {
						t.Errorf("%s at %d was claimed by %s and by %s", tm.Key, tm.WakeAt, prev, owner)
					}
					got[id] = owner
				}
				mu.Unlock()
			}
			t.Errorf("%s: ClaimDue did not run dry", owner)
		}()
	}
	close(start)
	wg.Wait()
	if len(got) != claimRaceTimers {
		t.Fatalf("%d racing claimers claimed %d timers, want all %d", timerClaimers, len(got), claimRaceTimers)
	}
}

// closed: after Close, ClaimDue returns store.ErrClosed.
func (k timerClaimKit) closed(t *testing.T) {
	s, c := k.open(t)
	mustPut(t, s, timerAt("k", 1))
	closeStore(t, s)
	if _, err := c.ClaimDue(context.Background(), "a", 10, timerClaimTTL, 10); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ClaimDue after Close = %v, want store.ErrClosed", err)
	}
}
