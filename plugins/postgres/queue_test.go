package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// The queue and timer-claim kits run against stores that own their DB, on
// a fresh schema each (see conformance_test.go); not parallel, for the
// kits' leak checks.

func TestQueueStoreConformance(t *testing.T) {
	storetest.RunQueueStore(t, func(t *testing.T) store.QueueStore {
		s, err := OpenQueueStore(context.Background(), testOptions(t, newSchema(t)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestTimerClaimsConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.TimerStore {
		s, err := OpenTimerStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunTimerClaims(t, storetest.TimerStoreFactory{
		New: func(t *testing.T) store.TimerStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.TimerStore) store.TimerStore {
			return open(t, closed.(*TimerStore).Schema())
		},
	})
}

// Sizes of the two-node queue test.
const (
	nodeClaimers   = 4 // goroutines per node
	nodeItems      = 40
	nodeLimit      = 2  // Concurrency
	nodeRate       = 3  // claims per nodeRateWindow
	nodeRateWindow = 10 // logical milliseconds
	nodeClaimTTL   = 1 << 40
	nodeMaxRounds  = 100_000 // a claimer running longer has hung
)

// Two nodes (two DBs, two pools) on one schema claim and complete one
// queue at once under Concurrency 2 and a Rate: the claims held at once
// never pass 2 (each holder counts itself from Claim's return to just
// before Complete, an undercount of what the store holds), no window of
// nodeRateWindow ending at a claim's time holds more than nodeRate claims,
// and every item is handed out exactly once. Time is a shared logical
// clock that every Claim advances, so the nodes' Now values reach the
// store out of order, as two nodes' clocks would; no claim expires.
func TestQueueTwoNodesHoldLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	nodes := []*QueueStore{openDB(t, schema).QueueStore(), openDB(t, schema).QueueStore()}
	for i := range nodeItems {
		it := store.QueueItem{Queue: "jobs", ExecutionID: fmt.Sprintf("item-%02d", i), FlowID: "f", Priority: i % 3}
		if added, err := nodes[i%2].Enqueue(ctx, it); err != nil || !added {
			t.Fatalf("Enqueue(%s) = %v, %v", it.ExecutionID, added, err)
		}
	}
	r := &nodeRace{limits: store.QueueLimits{Concurrency: nodeLimit, Rate: nodeRate, RateWindow: nodeRateWindow},
		handed: map[string]string{}}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for n, node := range nodes {
		for w := range nodeClaimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := r.drain(ctx, node, fmt.Sprintf("node-%d/%d", n, w)); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(r.handed) != nodeItems {
		t.Fatalf("%d items handed out, want all %d", len(r.handed), nodeItems)
	}
	if err := checkRate(r.claimedAt, nodeRate, nodeRateWindow); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		d, err := node.Depth(ctx, "jobs", r.clock.Load())
		if err != nil || d != (store.QueueDepth{Done: nodeItems}) {
			t.Fatalf("Depth after the race = %+v, %v; want all %d done", d, err, nodeItems)
		}
	}
}

// nodeRace is the shared state of TestQueueTwoNodesHoldLimits's claimers.
type nodeRace struct {
	limits    store.QueueLimits
	clock     atomic.Int64
	completed atomic.Int64
	mu        sync.Mutex
	held      int
	handed    map[string]string // execution id -> owner
	claimedAt []int64           // one entry per claim
}

// drain claims and completes as owner on node until every item is done.
func (r *nodeRace) drain(ctx context.Context, node *QueueStore, owner string) error {
	for range nodeMaxRounds {
		if r.completed.Load() == nodeItems {
			return nil
		}
		req := store.ClaimRequest{Queue: "jobs", Owner: owner, Now: r.clock.Add(1), TTL: nodeClaimTTL, Max: 2, Limits: r.limits}
		got, err := node.Claim(ctx, req)
		if err != nil {
			return fmt.Errorf("%s: Claim: %w", owner, err)
		}
		if err := r.hold(got); err != nil {
			return fmt.Errorf("%s: %w", owner, err)
		}
		for _, c := range got {
			r.let()
			if err := node.Complete(ctx, c); err != nil {
				return fmt.Errorf("%s: Complete(%s): %w", owner, c.Item.ExecutionID, err)
			}
			r.completed.Add(1)
		}
	}
	return fmt.Errorf("%s: the queue did not drain in %d rounds", owner, nodeMaxRounds)
}

// hold counts claims as held and fails on the limit passed or an item
// handed out twice.
func (r *nodeRace) hold(claims []store.Claim) error {
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
		r.claimedAt = append(r.claimedAt, c.ClaimedAt)
	}
	return nil
}

// let stops counting one claim as held, just before it is completed.
func (r *nodeRace) let() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held--
}

// checkRate fails when a window (t-window, t] ending at a claim time t
// holds more than rate of the claim times.
func checkRate(times []int64, rate int, window int64) error {
	sorted := append([]int64(nil), times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	lo := 0
	for hi, t := range sorted {
		for sorted[lo] <= t-window {
			lo++
		}
		// The window ends at t, so it holds every claim at t too.
		end := hi
		for end+1 < len(sorted) && sorted[end+1] == t {
			end++
		}
		if n := end - lo + 1; n > rate {
			return fmt.Errorf("the window (%d, %d] holds %d claims, above Rate %d", t-window, t, n, rate)
		}
	}
	return nil
}

// A clock that steps back cannot buy a claim: a claim at now counts the
// recorded claims after now-RateWindow, later ones included, so the window
// ending at the later claim never holds more than Rate.
func TestQueueRateCountsLaterClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTestDB(t).QueueStore()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: id, FlowID: "f"}); err != nil {
			t.Fatal(err)
		}
	}
	l := store.QueueLimits{Rate: 1, RateWindow: 100}
	req := func(now int64) store.ClaimRequest {
		return store.ClaimRequest{Queue: "q", Owner: "o", Now: now, TTL: 1_000, Max: 5, Limits: l}
	}
	claimN := func(now int64, want int) {
		t.Helper()
		got, err := s.Claim(ctx, req(now))
		if err != nil || len(got) != want {
			t.Fatalf("Claim at %d = %d claims, %v; want %d", now, len(got), err, want)
		}
	}
	claimN(1_000, 1)
	claimN(950, 0)   // (850, 950] is free, but (900, 1000] would hold two
	claimN(1_099, 0) // (999, 1099] holds the claim at 1000
	claimN(1_100, 1)
	// Pruning keeps the newest Rate claim times: one row is left.
	if n := adminQueryInt(t, `SELECT count(*) FROM `+quoted(s.Schema())+`.queue_claims`); n != 1 {
		t.Fatalf("queue_claims holds %d rows after pruning to Rate 1, want 1", n)
	}
}

// PostgreSQL text holds no NUL byte and only UTF-8: such an item or owner
// is refused with the typed error before anything is written, and a
// claim's keys that no stored claim could have are ErrClaimLost.
func TestQueueRefusesTextPostgresCannotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTestDB(t).QueueStore()
	for field, it := range map[string]store.QueueItem{
		"ExecutionID":  {Queue: "q", ExecutionID: "a\x00b", FlowID: "f"},
		"FlowID":       {Queue: "q", ExecutionID: "a", FlowID: "f\xff"},
		"Tenant":       {Queue: "q", ExecutionID: "a", FlowID: "f", Tenant: "t\x00"},
		"PartitionKey": {Queue: "q", ExecutionID: "a", FlowID: "f", PartitionKey: "\xfe"},
	} {
		added, err := s.Enqueue(ctx, it)
		var qe *store.QueueItemError
		if added || !errors.As(err, &qe) || qe.Field != field {
			t.Fatalf("Enqueue with a bad %s = %v, %v; want a *store.QueueItemError for it", field, added, err)
		}
	}
	if n := adminQueryInt(t, `SELECT count(*) FROM `+quoted(s.Schema())+`.queue_items`); n != 0 {
		t.Fatalf("refused items stored %d rows", n)
	}
	if _, err := s.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: "a", FlowID: "f"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Claim(ctx, store.ClaimRequest{Queue: "q", Owner: "o\x00", Now: 1, TTL: 10, Max: 1})
	var qe *store.QueueItemError
	if !errors.As(err, &qe) || qe.Field != "Owner" {
		t.Fatalf("Claim by an owner with a NUL = %v, want a *store.QueueItemError for Owner", err)
	}
	got, err := s.Claim(ctx, store.ClaimRequest{Queue: "q\xff", Owner: "o", Now: 1, TTL: 10, Max: 1})
	if err != nil || len(got) != 0 {
		t.Fatalf("Claim of a queue no item can have = %v, %v; want nothing", got, err)
	}
	ghost := store.Claim{Item: store.QueueItem{Queue: "q", ExecutionID: "a\x00"}, Owner: "o", Token: 1}
	if err := s.Complete(ctx, ghost); !errors.Is(err, store.ErrClaimLost) {
		t.Fatalf("Complete of an unstorable id = %v, want store.ErrClaimLost", err)
	}
	var le *store.QueueLimitsError
	if _, err := s.Claim(ctx, store.ClaimRequest{Queue: "q", Owner: "o", Now: 1<<63 - 5, TTL: 10, Max: 1}); !errors.As(err, &le) {
		t.Fatalf("Claim with Now+TTL past int64 = %v, want a *store.QueueLimitsError", err)
	}
	if d, err := s.Depth(ctx, "q", 1); err != nil || d != (store.QueueDepth{Ready: 1}) {
		t.Fatalf("Depth after the refusals = %+v, %v; want the one item ready", d, err)
	}
}

// Two nodes (two DBs, two pools) claiming the due timers of one schema at
// once get disjoint timers, and all of them.
func TestTimerClaimsTwoNodesDisjoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	nodes := []*TimerStore{openDB(t, schema).TimerStore(), openDB(t, schema).TimerStore()}
	const timers = 60
	for i := range timers {
		if err := nodes[0].Put(ctx, store.Timer{Key: fmt.Sprintf("t%02d", i), WakeAt: int64(i % 5)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string]string{} // key -> owner
	var wg sync.WaitGroup
	start := make(chan struct{})
	for n, node := range nodes {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				owner := fmt.Sprintf("node-%d/%d", n, w)
				for range timers + 1 {
					page, err := node.ClaimDue(ctx, owner, 100, 1_000, 3)
					if err != nil {
						t.Errorf("%s: ClaimDue: %v", owner, err)
						return
					}
					if len(page) == 0 {
						return
					}
					mu.Lock()
					for _, tm := range page {
						if prev, dup := got[tm.Key]; dup {
							t.Errorf("%s claimed by %s and by %s", tm.Key, prev, owner)
						}
						got[tm.Key] = owner
					}
					mu.Unlock()
				}
				t.Errorf("%s: ClaimDue did not run dry", owner)
			}()
		}
	}
	close(start)
	wg.Wait()
	if len(got) != timers {
		t.Fatalf("two nodes claimed %d timers, want all %d", len(got), timers)
	}
}

// The preset hands the queue store over, in Stores and in its store.Set.
func TestStorageHasQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Storage(ctx, testOptions(t, newSchema(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	if st.Queues == nil || st.StoreSet().Queues != st.Queues {
		t.Fatal("Storage left Queues unset")
	}
	if _, err := st.Queues.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: "a", FlowID: "f"}); err != nil {
		t.Fatal(err)
	}
}
