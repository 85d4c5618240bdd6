package sqlite

// Benchmarks of the timer store, to be read beside the raw-insert
// benchmarks of bench_test.go (same file pragmas, synchronous=FULL):
//
//	go test -run '^$' -bench 'Timer|RawInsert' -benchtime 2s ./plugins/sqlite/
//
// Put and Delete are each one write transaction, so both are bound by one
// commit (one fsync) per call, like BenchmarkRawInsertOneRowPerCommit; Due
// is a read of the (wake_at, key) index on the read pool.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/loom-kernel/loom/store"
)

// benchTimerPayload is a typical sleep wake-up payload (30 bytes).
var benchTimerPayload = json.RawMessage(`{"on":"sleep","wakeAt":1700000}`)

// benchTimer is timer i, of one of 64 executions, waking at wakeAt.
func benchTimer(i int, wakeAt int64) store.Timer {
	return store.Timer{
		Key:         fmt.Sprintf("timer-%07d", i),
		ExecutionID: fmt.Sprintf("exec-%02d", i%64),
		WakeAt:      wakeAt,
		Payload:     benchTimerPayload,
	}
}

// seedTimers stores n timers waking at wakeAt in one transaction on db's
// writer: set-up for tests and benchmarks that measure reading and
// deleting, not n commits.
func seedTimers(tb testing.TB, db *DB, n int, wakeAt int64) {
	tb.Helper()
	err := db.w.run(context.Background(), func(c *rawConn) error {
		return c.inTx(func() error {
			for i := range n {
				t := benchTimer(i, wakeAt)
				if _, err := c.exec(sqlPutTimer, t.Key, t.ExecutionID, t.WakeAt, string(t.Payload)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		tb.Fatalf("seed %d timers: %v", n, err)
	}
}

// BenchmarkTimerPut: one Put per durable commit, each on a new key (an
// insert into the table and its two indexes), reported as puts/s.
func BenchmarkTimerPut(b *testing.B) {
	s := openTestDB(b).TimerStore()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Put(ctx, benchTimer(i, int64(i))); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}

// BenchmarkTimerDue10k: 10,000 timers due at the same instant, drained the
// poller's way — Due(now, 500), then Delete of each timer it returned with
// its wake time — until Due is empty. It reports drained timers/s and the
// mean time of one Due page (the rest is the Deletes, one commit each).
func BenchmarkTimerDue10k(b *testing.B) {
	const n, page, now = 10_000, 500, 1_700_000_000_000
	s := openTestDB(b).TimerStore()
	ctx := context.Background()
	var inDue time.Duration
	pages := 0
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		seedTimers(b, s.DB(), n, now)
		b.StartTimer()
		drained := 0
		for {
			start := time.Now()
			due, err := s.Due(ctx, now, page)
			inDue += time.Since(start)
			pages++
			if err != nil {
				b.Fatal(err)
			}
			if len(due) == 0 {
				break
			}
			for _, t := range due {
				if ok, err := s.Delete(ctx, t.Key, t.WakeAt); err != nil || !ok {
					b.Fatalf("Delete(%q) = %v, %v", t.Key, ok, err)
				}
			}
			drained += len(due)
		}
		if drained != n {
			b.Fatalf("drained %d timers, want %d", drained, n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "timers/s")
	b.ReportMetric(float64(inDue.Microseconds())/float64(pages), "µs/Due")
}
