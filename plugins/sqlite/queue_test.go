package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// openQueueStore opens a QueueStore that owns the file at path.
func openQueueStore(t *testing.T, path string) *QueueStore {
	t.Helper()
	s, err := OpenQueueStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestQueueStoreConformance(t *testing.T) {
	storetest.RunQueueStore(t, func(t *testing.T) store.QueueStore {
		return openQueueStore(t, filepath.Join(t.TempDir(), "queue.db"))
	})
}

func TestTimerClaimsConformance(t *testing.T) {
	storetest.RunTimerClaims(t, storetest.TimerStoreFactory{
		New: func(t *testing.T) store.TimerStore {
			s, err := OpenTimerStore(filepath.Join(t.TempDir(), "timers.db"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

// TestQueueSurvivesReopen: enqueued items, live and expired claims, done
// items and the Rate window survive closing and reopening the file, and the
// claims carry on from their stored tokens.
func TestQueueSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	const now, ttl = 10_000, 1_000
	rate := store.QueueLimits{Rate: 3, RateWindow: 500}
	req := func(owner string, at int64, max int) store.ClaimRequest {
		return store.ClaimRequest{Queue: "q", Owner: owner, Now: at, TTL: ttl, Max: max, Limits: rate}
	}
	s := openQueueStore(t, path)
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := s.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: id, FlowID: "f",
			Input: []byte(`{"id":"` + id + `"}`), Tenant: "t-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := s.Claim(ctx, req("node-a", now, 3))
	if err != nil || len(held) != 3 {
		t.Fatalf("Claim = %d claims, %v; want 3", len(held), err)
	}
	if err := s.Complete(ctx, held[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openQueueStore(t, path)
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if d, err := s.Depth(ctx, "q", now); err != nil || d != (store.QueueDepth{Ready: 1, Claimed: 2, Done: 1}) {
		t.Fatalf("Depth after reopen = %+v, %v", d, err)
	}
	if got, err := s.Claim(ctx, req("node-b", now+1, 5)); err != nil || len(got) != 0 {
		t.Fatalf("Claim inside the Rate window after reopen = %d claims, %v; want none", len(got), err)
	}
	if tenants, err := s.ReadyTenants(ctx, "q", now); err != nil || !slices.Equal(tenants, []string{"t-d"}) {
		t.Fatalf("ReadyTenants after reopen = %q, %v; want [t-d]", tenants, err)
	}
	renewed, err := s.Renew(ctx, held[1], now+ttl-1, ttl)
	if err != nil || renewed.Token != held[1].Token {
		t.Fatalf("Renew of a claim made before the reopen = %+v, %v", renewed, err)
	}
	taken, err := s.Claim(ctx, req("node-b", now+ttl, 5))
	if err != nil || len(taken) != 2 || taken[0].Item.ExecutionID != "c" || taken[1].Item.ExecutionID != "d" {
		t.Fatalf("Claim after expiry = %+v, %v; want c and d", taken, err)
	}
	if taken[0].Token <= held[2].Token || taken[0].Attempt != 2 || string(taken[0].Item.Input) != `{"id":"c"}` {
		t.Fatalf("taken-over claim = %+v, want a token above %d, attempt 2 and its input", taken[0], held[2].Token)
	}
	if err := s.Complete(ctx, held[2]); !errors.Is(err, store.ErrClaimLost) {
		t.Fatalf("Complete by the claim taken over = %v, want store.ErrClaimLost", err)
	}
	if added, err := s.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: "a", FlowID: "f"}); err != nil || added {
		t.Fatalf("Enqueue of a done item after reopen = %v, %v; want false", added, err)
	}
}

// TestTimerClaimSurvivesReopen: a timer's claim is durable: after a reopen
// it still hides the timer from ClaimDue until it expires.
func TestTimerClaimSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timers.db")
	ctx := context.Background()
	s, err := OpenTimerStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, store.Timer{Key: "k", WakeAt: 5}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimDue(ctx, "a", 10, 100, 10); err != nil || len(got) != 1 {
		t.Fatalf("ClaimDue = %+v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenTimerStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if got, err := s.ClaimDue(ctx, "b", 109, 100, 10); err != nil || len(got) != 0 {
		t.Fatalf("ClaimDue inside the claim after reopen = %+v, %v; want none", got, err)
	}
	if got, err := s.ClaimDue(ctx, "b", 110, 100, 10); err != nil || len(got) != 1 {
		t.Fatalf("ClaimDue at the claim's expiry after reopen = %+v, %v; want the timer", got, err)
	}
}

// TestStorageCarriesQueues: the preset's Queues shares the file with the
// other stores, is in its StoreSet, and closes with Stores.Close.
func TestStorageCarriesQueues(t *testing.T) {
	st, err := Storage(StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	if st.StoreSet().Queues == nil {
		t.Fatal("StoreSet().Queues is nil")
	}
	if _, ok := st.Timers.(store.TimerClaimer); !ok {
		t.Fatal("Stores.Timers is not a store.TimerClaimer")
	}
	ctx := context.Background()
	if _, err := st.Queues.Enqueue(ctx, store.QueueItem{Queue: "q", ExecutionID: "e", FlowID: "f"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Queues.Depth(ctx, "q", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Depth after Stores.Close = %v, want store.ErrClosed", err)
	}
}
