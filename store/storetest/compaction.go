package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// CompactionFactory opens the storage RunCompaction checks.
type CompactionFactory struct {
	// Open opens the storage: a store.Set with Events (a
	// store.PrefixTrimmer), Snapshots and Archive, and what closes it. The
	// kit calls it twice: first on fresh storage, then, after closing the
	// first, on the same durable storage (a file reopened, a schema
	// reconnected).
	Open func(t *testing.T) (store.Set, func() error)
}

// RunCompaction runs loom.Runtime.Compact end to end through a storage
// preset: a parked execution of an 8-step flow is compacted through #9,
// and a new runtime over the reopened storage sees #0 and the tail in the
// log and #1..#9 in the archive (ReadArchived), loads the same state byte
// for byte, resumes it and completes it without running a compacted step
// again.
func RunCompaction(t *testing.T, f CompactionFactory) {
	t.Helper()
	if f.Open == nil {
		t.Fatal("storetest: CompactionFactory.Open is nil")
	}
	ctx := context.Background()
	var runs atomic.Int64
	const steps, gateAt, through = 8, 6, 9
	open := func() (*loom.Runtime, store.Set) {
		t.Helper()
		set, closeSet := f.Open(t)
		rt, err := loom.New(loom.Config{Storage: set, Flows: []*loom.Flow{gatedSteps(&runs, steps, gateAt)}, StickyParks: -1,
			TimerPoll: -1, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			rt.Close()
			if err := closeSet(); err != nil && err != store.ErrClosed {
				t.Error(err)
			}
		})
		return rt, set
	}
	rt, set := open()
	id, err := rt.Start(ctx, "steps", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, set.Events, id)
	stateBefore, err := rt.LoadState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rt.Compact(ctx, id, through); err != nil || res.Through != through || res.Archived != through {
		t.Fatalf("Compact: %+v %v", res, err)
	}
	rt.Close()

	next, reopened := open()
	assertEvents(t, "the log after compaction", readAll(t, reopened.Events, id), append([]event.Envelope{before[0]}, before[through+1:]...))
	if got, err := reopened.Events.(store.PrefixTrimmer).TrimmedThrough(ctx, id); err != nil || got != through {
		t.Fatalf("TrimmedThrough after reopening: %d %v", got, err)
	}
	archived, err := next.ReadArchived(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	assertEvents(t, "the archive", archived, before[1:through+1])
	st, err := next.LoadState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := fold.Encode(st)
	want, _ := fold.Encode(stateBefore)
	if string(got) != string(want) {
		t.Fatalf("state after reopening:\n%s\nwant\n%s", got, want)
	}
	if err := next.Resume(ctx, id, loom.ResumeEvent{EventType: "g"}); err != nil {
		t.Fatal(err)
	}
	out, err := next.WaitForCompletion(ctx, id)
	if err != nil || string(out.Output) != fmt.Sprint(steps) {
		t.Fatalf("completion: %s %v", out.Output, err)
	}
	if n := runs.Load(); n != steps {
		t.Fatalf("steps ran %d times, want %d: a compacted step ran again", n, steps)
	}
}

// gatedSteps is the flow "steps": n steps, a gate "g" before step gateAt,
// then the rest; runs counts the steps' effects run, over every runtime.
func gatedSteps(runs *atomic.Int64, n, gateAt int) *loom.Flow {
	return loom.NewFlow("steps", func(ctx *loom.Context, in int) (int, error) {
		for i := range n {
			if i == gateAt {
				if _, err := ctx.Suspend("g"); err != nil {
					return 0, err
				}
			}
			if _, err := ctx.Run(fmt.Sprintf("s%d", i), func(context.Context) (any, error) {
				runs.Add(1)
				return in + i, nil
			}); err != nil {
				return 0, err
			}
			in++
		}
		return in, nil
	})
}
