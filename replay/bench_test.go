package replay_test

// BenchmarkCheck measures replay.Check over a SQLite file (opened
// read-only) of parked executions, at two sizes to show it is linear; the
// target is 10,000 stored executions within one CI minute on the 2-core
// development machine. Run
//
//	go test -run '^$' -bench Check -benchtime 1x ./replay/

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/replay"
)

// buildParked writes n parked executions of orderFlow(a, b, c) to a new
// SQLite file, 64 in flight, and returns its path.
func buildParked(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.db")
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	var runs atomic.Int64
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{orderFlow(&runs, "a", "b", "c")},
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				id := "x-" + strconv.FormatInt(i, 10)
				if _, err := rt.Start(ctx, "order", "in", loom.WithExecutionID(id)); err != nil {
					b.Error(err)
					return
				}
				if _, err := rt.WaitForSuspend(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := rt.Close(); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			path := buildParked(b, n)
			ro, err := sqlite.OpenReadOnly(path)
			if err != nil {
				b.Fatal(err)
			}
			defer ro.Close()
			var runs atomic.Int64
			cfg := candidate(&runs, "a", "b", "c")
			for b.Loop() {
				rep, err := replay.Check(context.Background(), ro.EventStore(), cfg, replay.Options{})
				if err != nil || rep.Checked != n || !rep.OK() {
					b.Fatalf("%d checked, %d incompatible, %v", rep.Checked, rep.Incompatible, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "executions/s")
		})
	}
}
