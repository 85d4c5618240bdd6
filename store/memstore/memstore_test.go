package memstore_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// TestEventStoreConformance runs the EventStore kit with the default
// payload cap.
func TestEventStoreConformance(t *testing.T) {
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore { return memstore.NewEventStore() },
	})
}

// TestEventStoreConformanceSmallCap runs the EventStore kit with a 4 KiB
// cap set through WithLimits, so the cap refusals exercise the option.
func TestEventStoreConformanceSmallCap(t *testing.T) {
	const limit = 4 << 10
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore {
			return memstore.NewEventStore(memstore.WithLimits(event.Limits{MaxPayloadBytes: limit}))
		},
		MaxPayloadBytes: limit,
	})
}

// TestStatusIndexConformance runs the StatusIndex kit.
func TestStatusIndexConformance(t *testing.T) {
	storetest.RunStatusIndex(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore { return memstore.NewEventStore() },
	})
}

// TestExecutionCatalogConformance runs the ExecutionCatalog kit.
func TestExecutionCatalogConformance(t *testing.T) {
	storetest.RunExecutionCatalog(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore { return memstore.NewEventStore() },
	})
}

// TestSnapshotStoreConformance runs the SnapshotStore kit.
func TestSnapshotStoreConformance(t *testing.T) {
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(*testing.T) store.SnapshotStore { return memstore.NewSnapshotStore() },
	})
}

// TestBranchRegistryConformance runs the BranchRegistry kit.
func TestBranchRegistryConformance(t *testing.T) {
	storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{
		New: func(*testing.T) store.BranchRegistry { return memstore.NewBranchRegistry() },
	})
}

// TestTimerStoreConformance runs the TimerStore kit.
func TestTimerStoreConformance(t *testing.T) {
	storetest.RunTimerStore(t, storetest.TimerStoreFactory{
		New: func(*testing.T) store.TimerStore { return memstore.NewTimerStore() },
	})
}

// TestLeaseStoreConformance runs the LeaseStore kit.
func TestLeaseStoreConformance(t *testing.T) {
	storetest.RunLeaseStore(t, storetest.LeaseStoreFactory{
		New: func(*testing.T) store.LeaseStore { return memstore.NewLeaseStore() },
	})
}

// TestContentStoreConformance runs the ContentStore kit with the default
// cap, counting blobs through Stats.
func TestContentStoreConformance(t *testing.T) {
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New:   func(*testing.T) store.ContentStore { return memstore.NewContentStore() },
		Count: countContent,
	})
}

// TestContentStoreConformanceSmallCap runs the ContentStore kit with a
// 64 KiB cap set through WithMaxContentBytes, so the kit also stores a blob
// of exactly the cap.
func TestContentStoreConformanceSmallCap(t *testing.T) {
	const limit = 64 << 10
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New: func(*testing.T) store.ContentStore {
			return memstore.NewContentStore(memstore.WithMaxContentBytes(limit))
		},
		Count:    countContent,
		MaxBytes: limit,
	})
}

// countContent counts the blobs of a memstore.ContentStore.
func countContent(t *testing.T, s store.ContentStore) int {
	n, _, err := s.(*memstore.ContentStore).Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return n
}

// TestTimerDueDefaultLimit: a limit below 1 returns DefaultDueLimit timers.
func TestTimerDueDefaultLimit(t *testing.T) {
	s := newTimerStore(t)
	putTimers(t, s, memstore.DefaultDueLimit+1, func(i int) int64 { return 7 })
	for _, limit := range []int{0, -1} {
		got, err := s.Due(context.Background(), 7, limit)
		if err != nil || len(got) != memstore.DefaultDueLimit {
			t.Fatalf("Due(7, %d) = %d timers, %v; want %d", limit, len(got), err, memstore.DefaultDueLimit)
		}
	}
}

var timerSeed = flag.Uint64("timer.seed", 0, "seed of TestTimerStoreMatchesSortedModel (0: from the clock)")

// TestTimerStoreMatchesSortedModel runs random Puts, Deletes (current and
// stale wake times) and Dues against the store and against a map whose Due
// sorts everything, and requires the same answers: the heap walk is
// checked against the obvious implementation. Rerun a failure with
// -timer.seed.
func TestTimerStoreMatchesSortedModel(t *testing.T) {
	seed := *timerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -timer.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	s := newTimerStore(t)
	ctx := context.Background()
	model := map[string]int64{}
	for step := range 20_000 {
		key := fmt.Sprintf("k%03d", rng.IntN(400))
		wakeAt := rng.Int64N(50)
		switch op := rng.IntN(10); {
		case op < 5:
			if err := s.Put(ctx, store.Timer{Key: key, WakeAt: wakeAt}); err != nil {
				t.Fatalf("step %d: Put: %v", step, err)
			}
			model[key] = wakeAt
		case op < 8:
			if cur, ok := model[key]; ok && rng.IntN(2) == 0 {
				wakeAt = cur
			}
			ok, err := s.Delete(ctx, key, wakeAt)
			cur, had := model[key]
			if want := had && cur == wakeAt; err != nil || ok != want {
				t.Fatalf("step %d (seed %d): Delete(%q, %d) = %v, %v; want %v", step, seed, key, wakeAt, ok, err, want)
			}
			if ok {
				delete(model, key)
			}
		default:
			limit := rng.IntN(40) - 2
			got, err := s.Due(ctx, wakeAt, limit)
			if err != nil {
				t.Fatalf("step %d: Due: %v", step, err)
			}
			if want := modelDue(model, wakeAt, limit); !slices.Equal(timerKeyList(got), want) {
				t.Fatalf("step %d (seed %d): Due(%d, %d) = %q, want %q", step, seed, wakeAt, limit, timerKeyList(got), want)
			}
		}
	}
}

// modelDue is Due the obvious way: filter, sort everything, cut.
func modelDue(model map[string]int64, now int64, limit int) []string {
	if limit < 1 {
		limit = memstore.DefaultDueLimit
	}
	var keys []string
	for k, w := range model {
		if w <= now {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(model[a], model[b]), cmp.Compare(a, b)) })
	return keys[:min(limit, len(keys))]
}

func timerKeyList(timers []store.Timer) []string {
	out := []string{}
	for _, tm := range timers {
		out = append(out, tm.Key)
	}
	return out
}

// newTimerStore returns an empty TimerStore closed at cleanup.
func newTimerStore(tb testing.TB) *memstore.TimerStore {
	tb.Helper()
	s := memstore.NewTimerStore()
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// timerPayload is the payload of the benchmark timers (a typical sleep
// wake-up: 30 bytes).
var timerPayload = json.RawMessage(`{"on":"sleep","wakeAt":1700000}`)

// putTimers stores n timers "timer-%07d" of one execution, waking at wakeAt(i).
func putTimers(tb testing.TB, s store.TimerStore, n int, wakeAt func(i int) int64) {
	tb.Helper()
	for i := range n {
		tm := store.Timer{Key: fmt.Sprintf("timer-%07d", i), ExecutionID: "exec-1", WakeAt: wakeAt(i), Payload: timerPayload}
		if err := s.Put(context.Background(), tm); err != nil {
			tb.Fatalf("Put: %v", err)
		}
	}
}

// BenchmarkTimerStoreMemory reports the heap bytes one stored timer costs:
// the live heap after 10,000 Puts (keys of 13 bytes, a shared execution
// id, a 30-byte payload) minus the live heap before, per timer. The key
// strings are allocated by the loop and kept by the store, so they count.
func BenchmarkTimerStoreMemory(b *testing.B) {
	const n = 10_000
	var perTimer float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := memstore.NewTimerStore()
		putTimers(b, s, n, func(i int) int64 { return int64(i * 7919 % n) })
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTimer += float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perTimer/float64(b.N), "B/timer")
}

// BenchmarkTimerDuePage: Due(limit 100) over 1,000 and 100,000 stored
// timers, a tenth of them due: the cost follows the page, not the store.
func BenchmarkTimerDuePage(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("of%d", n), func(b *testing.B) { benchmarkDuePage(b, n) })
	}
}

func benchmarkDuePage(b *testing.B, n int) {
	s := newTimerStore(b)
	putTimers(b, s, n, func(i int) int64 { return int64(i * 7919 % n) })
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		got, err := s.Due(ctx, int64(n/10-1), 100)
		if err != nil || len(got) != 100 {
			b.Fatalf("Due = %d timers, %v", len(got), err)
		}
	}
}

// TestListExecutionsWhileCreating pages through the listing while other
// goroutines create executions: every page stays ordered, every execution
// that existed before the walk began is listed, and a final walk sees all.
func TestListExecutionsWhileCreating(t *testing.T) {
	s := memstore.NewEventStore()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx := context.Background()
	create := func(id string) {
		ev := event.Envelope{ID: id + "#0", ExecutionID: id, Type: "T", Payload: json.RawMessage(`{}`)}
		if err := s.Append(ctx, id, 0, []event.Envelope{ev}); err != nil {
			t.Errorf("Append(%q): %v", id, err)
		}
	}
	for i := range 500 {
		create(fmt.Sprintf("before-%04d", i))
	}
	var wg sync.WaitGroup
	defer wg.Wait() // a failing walk still lets the creators finish before Close
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				create(fmt.Sprintf("during-%d-%04d", w, i))
			}
		}()
	}
	seen := map[string]bool{}
	last := ""
	for cursor := ""; ; {
		page, err := s.ListExecutions(ctx, cursor, 7)
		if err != nil {
			t.Fatalf("ListExecutions: %v", err)
		}
		for _, info := range page.Executions {
			if info.ExecutionID <= last {
				t.Fatalf("%q listed after %q", info.ExecutionID, last)
			}
			last = info.ExecutionID
			seen[last] = true
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	wg.Wait()
	for i := range 500 {
		if id := fmt.Sprintf("before-%04d", i); !seen[id] {
			t.Fatalf("%q existed before the walk but was not listed", id)
		}
	}
	page, err := s.ListExecutions(ctx, "", 2000)
	if err != nil || len(page.Executions) != 1500 || page.Next != "" {
		t.Fatalf("final listing: %d executions, next %q, %v; want 1500, \"\", nil", len(page.Executions), page.Next, err)
	}
}

func TestArchiveStoreConformance(t *testing.T) {
	storetest.RunArchiveStore(t, storetest.ArchiveStoreFactory{
		New: func(*testing.T) store.ArchiveStore { return memstore.NewArchiveStore() },
	})
}

func TestPrefixTrimmerConformance(t *testing.T) {
	storetest.RunPrefixTrimmer(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore { return memstore.NewEventStore() },
	})
}

func TestCompactionConformance(t *testing.T) {
	set := memstore.NewSet()
	storetest.RunCompaction(t, storetest.CompactionFactory{Open: func(*testing.T) (store.Set, func() error) {
		return set, func() error { return nil } // memory: the same stores stand for a reopened storage
	}})
}

func TestCompactionCrashes(t *testing.T) {
	storetest.RunCompactionCrashes(t, func(*testing.T) storetest.CompactionFactory {
		set := memstore.NewSet()
		return storetest.CompactionFactory{Open: func(*testing.T) (store.Set, func() error) { return set, func() error { return nil } }}
	})
}
