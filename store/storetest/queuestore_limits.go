package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// Sizes of the racing subtests.
const (
	queueClaimers    = 8  // goroutines claiming at once
	queueRaceLimit   = 3  // the Concurrency they share
	queueRaceItems   = 24 // items they drain
	queueClaimerSpin = 1_000_000
)

// limited is claimReq with limits.
func limited(owner string, now int64, max int, l store.QueueLimits) store.ClaimRequest {
	r := claimReq(owner, now, max)
	r.Limits = l
	return r
}

// enqueueIDs enqueues queueItem(id) for every id.
func enqueueIDs(t *testing.T, s store.QueueStore, ids ...string) {
	t.Helper()
	for _, id := range ids {
		mustEnqueue(t, s, queueItem(id))
	}
}

// limitConcurrency: Concurrency bounds the queue's live claims across
// owners, within one Claim and across several; completing or releasing a
// claim frees its slot.
func (k queueKit) limitConcurrency(t *testing.T) {
	s := k.open(t)
	enqueueIDs(t, s, "a", "b", "c", "d", "e", "f")
	l := store.QueueLimits{Concurrency: 3}
	held := expectClaimed(t, s, limited("o", claimNow, 10, l), "a", "b", "c")
	expectClaimed(t, s, limited("p", claimNow, 10, l))
	mustComplete(t, s, held[0])
	expectClaimed(t, s, limited("p", claimNow+1, 10, l), "d")
	expectClaimed(t, s, limited("q", claimNow+1, 10, l))
	mustReleaseClaim(t, s, held[1])
	expectClaimed(t, s, limited("q", claimNow+2, 10, l), "b")
	expectClaimed(t, s, limited("o", claimNow+2, 10, l))
	expectDepth(t, s, kitQueue, claimNow+2, store.QueueDepth{Ready: 2, Claimed: 3, Done: 1})
}

// limitPerOwner: PerOwner bounds one owner's live claims; other owners
// claim on, and a completed claim frees the owner's slot.
func (k queueKit) limitPerOwner(t *testing.T) {
	s := k.open(t)
	enqueueIDs(t, s, "a", "b", "c", "d", "e", "f")
	l := store.QueueLimits{PerOwner: 2}
	mine := expectClaimed(t, s, limited("o", claimNow, 10, l), "a", "b")
	expectClaimed(t, s, limited("o", claimNow, 10, l))
	expectClaimed(t, s, limited("p", claimNow, 1, l), "c")
	expectClaimed(t, s, limited("p", claimNow, 10, l), "d")
	mustComplete(t, s, mine[0])
	expectClaimed(t, s, limited("o", claimNow, 10, l), "e")
	expectClaimed(t, s, limited("o", claimNow, 10, l))
}

// limitPerPartition: PerPartition bounds the live claims of each non-empty
// partition key, skipping a full partition's items for later ones; the
// empty key is never bounded.
func (k queueKit) limitPerPartition(t *testing.T) {
	s := k.open(t)
	for _, c := range []struct {
		exec, part string
		prio       int
	}{
		{"a1", "a", 5}, {"a2", "a", 4}, {"a3", "a", 4}, {"b1", "b", 3}, {"b2", "b", 2}, {"n1", "", 1}, {"n2", "", 1}, {"n3", "", 0},
	} {
		it := queueItem(c.exec)
		it.PartitionKey, it.Priority = c.part, c.prio
		mustEnqueue(t, s, it)
	}
	one := store.QueueLimits{PerPartition: 1}
	held := expectClaimed(t, s, limited("o", claimNow, 4, one), "a1", "b1", "n1", "n2")
	expectClaimed(t, s, limited("p", claimNow, 10, one), "n3")
	expectClaimed(t, s, limited("p", claimNow, 10, one))
	mustComplete(t, s, held[0])
	expectClaimed(t, s, limited("p", claimNow, 10, one), "a2")
	two := store.QueueLimits{PerPartition: 2}
	expectClaimed(t, s, limited("q", claimNow, 10, two), "a3", "b2")
}

// limitRate: Rate/RateWindow allows at most Rate claims of the queue with
// ClaimedAt in (Now-RateWindow, Now], across owners; completing or
// releasing a claim does not give its rate back.
func (k queueKit) limitRate(t *testing.T) {
	s := k.open(t)
	enqueueIDs(t, s, "a", "b", "c", "d", "e", "f", "g")
	l := store.QueueLimits{Rate: 2, RateWindow: 100}
	const t0 = claimNow
	first := expectClaimed(t, s, limited("o", t0, 1, l), "a")
	second := expectClaimed(t, s, limited("p", t0, 5, l), "b")
	expectClaimed(t, s, limited("q", t0, 5, l))
	expectClaimed(t, s, limited("q", t0+50, 5, l))
	mustComplete(t, s, first[0])
	mustReleaseClaim(t, s, second[0])
	expectClaimed(t, s, limited("q", t0+99, 5, l))
	expectClaimed(t, s, limited("q", t0+100, 5, l), "b", "c")
	expectClaimed(t, s, limited("o", t0+150, 5, l))
	third := expectClaimed(t, s, limited("o", t0+200, 1, l), "d")
	mustComplete(t, s, third[0])
	expectClaimed(t, s, limited("p", t0+250, 5, l), "e")
	expectClaimed(t, s, limited("p", t0+299, 5, l))
	expectClaimed(t, s, limited("p", t0+300, 5, l), "f")
	expectClaimed(t, s, limited("p", t0+350, 5, l), "g")
}

// limitRateCountsReclaims: every claim counts toward Rate, a second claim
// of one item (after a Release) included.
func (k queueKit) limitRateCountsReclaims(t *testing.T) {
	s := k.open(t)
	enqueueIDs(t, s, "a", "b")
	l := store.QueueLimits{Rate: 2, RateWindow: 100}
	mustReleaseClaim(t, s, expectClaimed(t, s, limited("o", claimNow, 1, l), "a")[0])
	mustReleaseClaim(t, s, expectClaimed(t, s, limited("o", claimNow+1, 1, l), "a")[0])
	expectClaimed(t, s, limited("o", claimNow+2, 5, l))
	expectClaimed(t, s, limited("o", claimNow+100, 5, l), "a")
	expectClaimed(t, s, limited("o", claimNow+101, 5, l), "b")
}

// limitsIgnoreExpired: a claim that expired counts toward neither
// Concurrency, PerOwner nor PerPartition: its item and its slot are free.
func (k queueKit) limitsIgnoreExpired(t *testing.T) {
	s := k.open(t)
	for _, id := range []string{"a", "b", "c"} {
		it := queueItem(id)
		it.PartitionKey = "x"
		mustEnqueue(t, s, it)
	}
	conc := store.QueueLimits{Concurrency: 1}
	expectClaimed(t, s, limited("o", claimNow, 10, conc), "a")
	expectClaimed(t, s, limited("p", claimNow+queueTTL-1, 10, conc))
	expectClaimed(t, s, limited("p", claimNow+queueTTL, 10, conc), "a")
	owner := store.QueueLimits{PerOwner: 1}
	expectClaimed(t, s, limited("p", claimNow+2*queueTTL-1, 10, owner))
	expectClaimed(t, s, limited("p", claimNow+2*queueTTL, 10, owner), "a")
	part := store.QueueLimits{PerPartition: 1}
	expectClaimed(t, s, limited("q", claimNow+3*queueTTL-1, 10, part))
	expectClaimed(t, s, limited("q", claimNow+3*queueTTL, 10, part), "a")
}

// concurrentClaims: 8 owners claiming at once (2 each) with Concurrency 3
// are handed exactly 3 claims in all, no item twice.
func (k queueKit) concurrentClaims(t *testing.T) {
	s := k.open(t)
	for i := range queueRaceItems {
		mustEnqueue(t, s, queueItem(fmt.Sprintf("item-%02d", i)))
	}
	l := store.QueueLimits{Concurrency: queueRaceLimit}
	var (
		mu      sync.Mutex
		claimed = map[string]string{} // execution id -> owner
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range queueClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := limited(fmt.Sprintf("owner-%d", w), claimNow, 2, l)
			got, err := s.Claim(context.Background(), req)
			if err == nil {
				err = checkClaims(req, got)
			}
			if err != nil {
				t.Errorf("Claim(%s): %v", describeRequest(req), err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, c := range got {
				if prev, dup := claimed[c.Item.ExecutionID]; dup {
					t.Errorf("%q was handed to %s and to %s", c.Item.ExecutionID, prev, c.Owner)
				}
				claimed[c.Item.ExecutionID] = c.Owner
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(claimed) != queueRaceLimit {
		t.Fatalf("%d racing claimers were handed %d items under Concurrency %d, want exactly %d",
			queueClaimers, len(claimed), queueRaceLimit, queueRaceLimit)
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Ready: queueRaceItems - queueRaceLimit, Claimed: queueRaceLimit})
}

// concurrentClaimComplete: 8 owners claim and complete until the queue is
// drained, with Concurrency 3: the claims they hold together never pass 3
// (each holder counts itself from Claim's return to just before Complete,
// an undercount of what the store holds), and no item is handed out twice.
func (k queueKit) concurrentClaimComplete(t *testing.T) {
	s := k.open(t)
	for i := range queueRaceItems {
		mustEnqueue(t, s, queueItem(fmt.Sprintf("item-%02d", i)))
	}
	r := &claimRace{s: s, limits: store.QueueLimits{Concurrency: queueRaceLimit}, handed: map[string]string{}}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range queueClaimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := r.drain(fmt.Sprintf("owner-%d", w)); err != nil {
				t.Errorf("owner-%d: %v", w, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(r.handed) != queueRaceItems {
		t.Fatalf("%d items were handed out, want all %d", len(r.handed), queueRaceItems)
	}
	expectDepth(t, s, kitQueue, claimNow, store.QueueDepth{Done: queueRaceItems})
}

// claimRace is the shared state of concurrentClaimComplete's claimers.
type claimRace struct {
	s      store.QueueStore
	limits store.QueueLimits
	mu     sync.Mutex
	held   int               // claims the claimers hold now
	handed map[string]string // execution id -> first owner handed it
}

// drain claims and completes as owner until Depth shows nothing ready.
func (r *claimRace) drain(owner string) error {
	ctx := context.Background()
	req := limited(owner, claimNow, 2, r.limits)
	for range queueClaimerSpin {
		got, err := r.s.Claim(ctx, req)
		if err != nil {
			return err
		}
		if err := checkClaims(req, got); err != nil {
			return err
		}
		if len(got) == 0 {
			d, err := r.s.Depth(ctx, kitQueue, claimNow)
			if err != nil || d.Ready == 0 {
				return err
			}
			runtime.Gosched()
			continue
		}
		if err := r.hold(got); err != nil {
			return err
		}
		for _, c := range got {
			r.let(c)
			if err := r.s.Complete(ctx, c); err != nil {
				return fmt.Errorf("Complete(%s): %w", describeClaim(c), err)
			}
		}
	}
	return errors.New("the queue did not drain")
}

// hold counts claims as held and fails on a limit passed or an item
// handed out twice.
func (r *claimRace) hold(claims []store.Claim) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held += len(claims)
	if r.held > r.limits.Concurrency {
		return fmt.Errorf("%d claims held at once under Concurrency %d", r.held, r.limits.Concurrency)
	}
	for _, c := range claims {
		if prev, dup := r.handed[c.Item.ExecutionID]; dup {
			return fmt.Errorf("%q was handed to %s and to %s", c.Item.ExecutionID, prev, c.Owner)
		}
		r.handed[c.Item.ExecutionID] = c.Owner
	}
	return nil
}

// let stops counting c as held, just before it is completed.
func (r *claimRace) let(store.Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held--
}
