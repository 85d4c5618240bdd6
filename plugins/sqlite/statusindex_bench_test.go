package sqlite

// Benchmarks of the status index, to be read beside the append and raw
// benchmarks of bench_test.go, in one run:
//
//	go test -run '^$' -bench 'RecoveryScan|Append|RawInsertOneRow' -benchtime 2s ./plugins/sqlite/
//
// BenchmarkRecoveryScan is what a recovery pass reads: every page of
// ListUnfinished, over a file with 100 running executions and no ended
// ones, and over one with the same 100 beside 100 000 completed ones. The
// index makes the two cost the same (the "ratio" metric, target <= 2);
// ListExecutions, what Recover paged through before, is shown over the
// large file for scale. The append benchmarks here move the status on
// every append (a suspend or resume, or a new execution), the case where
// the index costs a row write; the append benchmarks of bench_test.go
// write step events, where it costs nothing.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
)

// seedExecutions writes running executions (STARTED, a step) and ended
// ones (STARTED, a step, COMPLETED) through the writer's own claim and
// insert path, many executions per transaction: set-up, not a measurement.
func seedExecutions(tb testing.TB, db *DB, running, ended int) {
	tb.Helper()
	const perTx = 5000
	write := func(prefix string, n int, types ...string) {
		for from := 0; from < n; from += perTx {
			err := db.w.run(context.Background(), func(c *rawConn) error {
				return c.inTx(func() error {
					pending := make(map[string]int64, perTx)
					var batches []*appendBatch
					for i := from; i < min(n, from+perTx); i++ {
						exec := fmt.Sprintf("%s-%06d", prefix, i)
						evs := make([]event.Envelope, len(types))
						for j, typ := range types {
							evs[j] = benchEnvelope(exec, int64(j))
							evs[j].Type = typ
						}
						b, _ := newAppendBatch(exec, 0, evs)
						refusal, err := claim(c, b, pending)
						if err != nil || refusal != nil {
							return fmt.Errorf("seed %s: %w %w", exec, err, refusal)
						}
						batches = append(batches, b)
					}
					return insertEvents(c, batches)
				})
			})
			if err != nil {
				tb.Fatal(err)
			}
		}
	}
	write("ended", ended, event.ExecutionStarted, event.StepCompleted, event.ExecutionCompleted)
	write("running", running, event.ExecutionStarted, event.StepCompleted)
}

// scanUnfinished pages through the whole index as a recovery pass does
// and returns how many entries it read.
func scanUnfinished(tb testing.TB, s *EventStore) int {
	n, after := 0, ""
	for {
		page, err := s.ListUnfinished(context.Background(), after, 256)
		if err != nil {
			tb.Fatal(err)
		}
		n += len(page.Executions)
		if page.Next == "" {
			return n
		}
		after = page.Next
	}
}

// scanExecutions pages through the whole listing, as Recover did before
// the index.
func scanExecutions(tb testing.TB, s *EventStore) int {
	n, after := 0, ""
	for {
		page, err := s.ListExecutions(context.Background(), after, 256)
		if err != nil {
			tb.Fatal(err)
		}
		n += len(page.Executions)
		if page.Next == "" {
			return n
		}
		after = page.Next
	}
}

func BenchmarkRecoveryScan(b *testing.B) {
	const running, ended = 100, 100_000
	small, large := openTestDB(b), openTestDB(b)
	start := time.Now()
	seedExecutions(b, small, running, 0)
	seedExecutions(b, large, running, ended)
	b.Logf("seeded %d + %d executions in %v", running, running+ended, time.Since(start).Round(time.Millisecond))
	for _, c := range []struct {
		name string
		db   *DB
	}{{"running=100", small}, {"running=100,completed=100000", large}} {
		b.Run("ListUnfinished/"+c.name, func(b *testing.B) {
			s := c.db.EventStore()
			for b.Loop() {
				if n := scanUnfinished(b, s); n != running {
					b.Fatalf("read %d entries, want %d", n, running)
				}
			}
		})
	}
	// Both files scanned in turn, so the ratio compares the same moments
	// of a shared machine.
	b.Run("ListUnfinished/ratio", func(b *testing.B) {
		var smallNs, largeNs time.Duration
		for b.Loop() {
			t0 := time.Now()
			scanUnfinished(b, small.EventStore())
			t1 := time.Now()
			scanUnfinished(b, large.EventStore())
			smallNs += t1.Sub(t0)
			largeNs += time.Since(t1)
		}
		b.ReportMetric(float64(largeNs)/float64(smallNs), "ratio")
		b.ReportMetric(float64(smallNs.Nanoseconds())/float64(b.N), "ns/scan-small")
		b.ReportMetric(float64(largeNs.Nanoseconds())/float64(b.N), "ns/scan-large")
	})
	b.Run("ListExecutions/running=100,completed=100000", func(b *testing.B) {
		s := large.EventStore()
		for b.Loop() {
			if n := scanExecutions(b, s); n != running+ended {
				b.Fatalf("listed %d executions, want %d", n, running+ended)
			}
		}
	})
}

// statusBenchEnvelope is the event at seq of exec that moves its status: a
// suspend or a resume, in turn.
func statusBenchEnvelope(exec string, seq int64) event.Envelope {
	e := benchEnvelope(exec, seq)
	e.Type = event.ExecutionSuspended
	if seq%2 == 0 {
		e.Type = event.ExecutionResumed
	}
	return e
}

// BenchmarkAppendStatusSingle: BenchmarkAppendSingle with every event a
// suspend or a resume, so every append also rewrites the execution's
// index row.
func BenchmarkAppendStatusSingle(b *testing.B) {
	s := openTestDB(b).EventStore()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		seq := int64(i)
		if err := s.Append(ctx, "exec-single", seq, []event.Envelope{statusBenchEnvelope("exec-single", seq)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportEventsPerSecond(b)
}

// BenchmarkAppendNewExecutionSingle: one appender, each Append the first
// event (EXECUTION_STARTED) of a new execution: its executions row, its
// index row and the look-up for continued executions waiting for it.
func BenchmarkAppendNewExecutionSingle(b *testing.B) {
	s := openTestDB(b).EventStore()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		exec := fmt.Sprintf("exec-%09d", i)
		e := benchEnvelope(exec, 0)
		e.Type = event.ExecutionStarted
		if err := s.Append(ctx, exec, 0, []event.Envelope{e}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportEventsPerSecond(b)
}

// BenchmarkAppendStatusConcurrent32: BenchmarkAppendConcurrent32 with
// every event a suspend or a resume.
func BenchmarkAppendStatusConcurrent32(b *testing.B) {
	db := openTestDB(b)
	s := db.EventStore()
	ctx := context.Background()
	var left = make(chan struct{}, b.N)
	for range b.N {
		left <- struct{}{}
	}
	close(left)
	done := make(chan error, 32)
	b.ResetTimer()
	for w := range 32 {
		go func() {
			exec := fmt.Sprintf("exec-%02d", w)
			for seq := int64(0); ; seq++ {
				if _, ok := <-left; !ok {
					done <- nil
					return
				}
				if err := s.Append(ctx, exec, seq, []event.Envelope{statusBenchEnvelope(exec, seq)}); err != nil {
					done <- err
					return
				}
			}
		}()
	}
	for range 32 {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportEventsPerSecond(b)
	if st := db.WriteStats(); st.Transactions > 0 {
		b.ReportMetric(float64(st.Events)/float64(st.Transactions), "events/commit")
	}
}

// BenchmarkAppendIndexCost measures, interleaved in one loop so a shared
// machine's drift hits all alike, one durable append of each kind on its
// own file: a step event (the index untouched), a suspend or resume (the
// index row rewritten), the first event of a new execution (index row
// inserted, plus the look-up for continued executions waiting for it), and
// the raw driver's one-row commit. It reports each one's mean time and the
// ratios of the three appends to the raw commit and of the status-moving
// ones to the step. Under synchronous=NORMAL (no fsync per commit) the
// ratios show the CPU the index adds; under FULL, what it adds to a
// durable append.
func BenchmarkAppendIndexCost(b *testing.B) {
	for _, sync := range []Synchronous{SyncFull, SyncNormal} {
		b.Run("sync="+sync.String(), func(b *testing.B) {
			ctx := context.Background()
			step := openTestDB(b, WithSynchronous(sync)).EventStore()
			status := openTestDB(b, WithSynchronous(sync)).EventStore()
			fresh := openTestDB(b, WithSynchronous(sync)).EventStore()
			raw := openTestDB(b, WithSynchronous(sync))
			var took [4]time.Duration
			timed := func(k int, fn func() error) {
				t0 := time.Now()
				if err := fn(); err != nil {
					b.Fatal(err)
				}
				took[k] += time.Since(t0)
			}
			i := int64(0)
			for b.Loop() {
				seq := i
				timed(0, func() error {
					return step.Append(ctx, "exec", seq, []event.Envelope{benchEnvelope("exec", seq)})
				})
				timed(1, func() error {
					return status.Append(ctx, "exec", seq, []event.Envelope{statusBenchEnvelope("exec", seq)})
				})
				timed(2, func() error {
					exec := fmt.Sprintf("exec-%09d", seq)
					e := benchEnvelope(exec, 0)
					e.Type = event.ExecutionStarted
					return fresh.Append(ctx, exec, 0, []event.Envelope{e})
				})
				timed(3, func() error {
					// The raw commit: one events row, as the writer's
					// connection inserts it, with no store logic.
					return raw.w.run(ctx, func(c *rawConn) error {
						return c.inTx(func() error { return rawInsertEventInto(c, "events", "raw", seq) })
					})
				})
				i++
			}
			n := float64(b.N)
			for k, name := range []string{"step", "status", "create", "raw"} {
				b.ReportMetric(float64(took[k].Nanoseconds())/n, "ns/"+name)
			}
			b.ReportMetric(float64(took[0])/float64(took[3]), "step/raw")
			b.ReportMetric(float64(took[1])/float64(took[3]), "status/raw")
			b.ReportMetric(float64(took[2])/float64(took[3]), "create/raw")
			b.ReportMetric(float64(took[1])/float64(took[0]), "status/step")
			b.ReportMetric(float64(took[2])/float64(took[0]), "create/step")
		})
	}
}

// rawInsertEventInto inserts the benchmark row of exec at seq into table.
func rawInsertEventInto(c *rawConn, table, exec string, seq int64) error {
	e := benchEnvelope(exec, seq)
	_, err := c.exec(`INSERT INTO `+table+` (execution_id, sequence, id, workflow_id, event_type, timestamp, payload, metadata)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, exec, seq, e.ID, e.WorkflowID, e.Type, e.Timestamp, string(e.Payload), nil)
	return err
}
