package writertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// The append benchmarks both plugins run beside their raw-driver
// baselines, so the ratios compare the same workloads.

// benchPayload is a typical step-completion payload (~130 bytes).
var benchPayload = json.RawMessage(`{"stepId":"charge-card","output":{"amount":12999,"currency":"EUR","receipt":"rcpt_8f14e45fceea167a5a36dedd4bea2543"}}`)

// BenchEnvelope is the event every benchmark row carries.
func BenchEnvelope(exec string, seq int64) event.Envelope {
	return event.Envelope{
		ID: exec + "#" + strconv.FormatInt(seq, 10), WorkflowID: "wf-bench", ExecutionID: exec,
		Type: "STEP_COMPLETED", Sequence: seq, Timestamp: 1_700_000_000_000 + seq, Payload: benchPayload,
	}
}

// ReportEventsPerSecond reports b.N events over the elapsed time.
func ReportEventsPerSecond(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchAppendSingle: one appender, one event per Append, each durable
// before the next.
func BenchAppendSingle(b *testing.B, s store.EventStore) {
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		seq := int64(i)
		if err := s.Append(ctx, "exec-single", seq, []event.Envelope{BenchEnvelope("exec-single", seq)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ReportEventsPerSecond(b)
}

// BenchAppendConcurrent: appenders goroutines, each on its own execution,
// one event per Append, b.N events in all; group commit folds them into
// shared transactions. stats, when set, adds the events per commit.
func BenchAppendConcurrent(b *testing.B, s store.EventStore, appenders int, stats func() Stats) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range appenders {
		wg.Go(func() {
			exec := fmt.Sprintf("exec-%02d", w)
			for seq := int64(0); left.Add(-1) >= 0; seq++ {
				if err := s.Append(ctx, exec, seq, []event.Envelope{BenchEnvelope(exec, seq)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	ReportEventsPerSecond(b)
	if stats == nil {
		return
	}
	if st := stats(); st.Transactions > 0 {
		b.ReportMetric(float64(st.Events)/float64(st.Transactions), "events/commit")
	}
}
