package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

type benchClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *benchClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *benchClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// parkSleepers starts n executions that all sleep until the same instant
// and returns the runtime, its clock and the heap bytes per parked
// execution.
func parkSleepers(b *testing.B, n int) (*loom.Runtime, *benchClock, sqlite.Stores, float64) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(b.TempDir(), "timers.db")})
	if err != nil {
		b.Fatal(err)
	}
	clock := &benchClock{now: time.UnixMilli(1_800_000_000_000)}
	wake := clock.now.Add(time.Hour)
	flow := loom.NewFlow("sleeper", func(ctx *loom.Context, _ struct{}) (int, error) {
		return 1, ctx.SleepUntil(wake)
	})
	rt, err := loom.New(loom.Config{Events: st.Events, Snapshots: st.Snapshots, Timers: st.Timers, Clock: clock,
		TimerPoll: -1, Flows: []*loom.Flow{flow}})
	if err != nil {
		b.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				id, err := rt.Start(ctx, "sleeper", nil, loom.WithExecutionID(fmt.Sprintf("s%05d", i)))
				if err == nil {
					_, err = rt.WaitForSuspend(ctx, id)
				}
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		ids <- i
	}
	close(ids)
	wg.Wait()
	perPark := float64(heap()-before) / float64(n)
	clock.set(wake)
	return rt, clock, st, perPark
}

// BenchmarkFire10kDueTimers: 10,000 executions sleep until the same
// instant; one FireDueTimers call (one poll cycle) wakes them all, in
// batches. Compare timers/s with BenchmarkRawInsertOneRowPerCommit.
func BenchmarkFire10kDueTimers(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		b.StopTimer()
		rt, _, st, perPark := parkSleepers(b, n)
		b.StartTimer()
		start := time.Now()
		fired, err := rt.FireDueTimers(context.Background())
		elapsed := time.Since(start)
		b.StopTimer()
		if err != nil || fired != n {
			b.Fatalf("fired %d of %d in one poll cycle: %v", fired, n, err)
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "timers/s")
		b.ReportMetric(perPark, "heapB/parked")
		rt.Close()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
