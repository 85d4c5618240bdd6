package loom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// BenchmarkRecoverPass measures one recovery pass over an SQLite file
// holding `running` crashed executions (each held by another node's live
// lease, so the pass looks at it and leaves it) beside `completed` ended
// ones. With the store's index of unfinished executions the pass costs
// O(running): the two sizes should take about the same time.
func BenchmarkRecoverPass(b *testing.B) {
	for _, completed := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("completed=%d/running=100", completed), func(b *testing.B) {
			benchRecoverPass(b, completed, 100)
		})
	}
}

func benchRecoverPass(b *testing.B, completed, running int) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "loom.db")
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.UnixMilli(1_800_000_000_000)
	flow := loom.NewFlow("bench.recover", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	// Logs written straight to the store, 64 appenders at a time (group
	// commit), as a crashed fleet would have left them.
	write := func(id string, ended bool) error {
		evs := []event.Envelope{{ID: id + ":0", WorkflowID: flow.ID, ExecutionID: id, Type: event.ExecutionStarted,
			Sequence: 0, Timestamp: now.UnixMilli(), Payload: json.RawMessage(`{"input":null}`)}}
		if ended {
			evs = append(evs, event.Envelope{ID: id + ":1", WorkflowID: flow.ID, ExecutionID: id, Type: event.ExecutionCompleted,
				Sequence: 1, Timestamp: now.UnixMilli(), Payload: json.RawMessage(`{"output":1}`)})
		}
		return st.Events.Append(ctx, id, 0, evs)
	}
	jobs := make(chan func() error)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for job := range jobs {
				if err := job(); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range completed {
		jobs <- func() error { return write(fmt.Sprintf("done-%06d", i), true) }
	}
	for i := range running {
		id := fmt.Sprintf("crashed-%03d", i)
		jobs <- func() error {
			if err := write(id, false); err != nil {
				return err
			}
			_, err := st.Leases.Acquire(ctx, id, "node-other", now.UnixMilli(), time.Hour.Milliseconds())
			return err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{flow}, Clock: fixedNow(now), LeaseTTL: time.Hour,
		Heartbeat: -1, TimerPoll: -1, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	b.ResetTimer()
	for b.Loop() {
		if n, err := rt.Recover(ctx); err != nil || n != 0 {
			b.Fatalf("recovered %d: %v", n, err)
		}
	}
}

type fixedNow time.Time

func (f fixedNow) Now() time.Time { return time.Time(f) }
