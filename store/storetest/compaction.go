package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// RunCompactionCrashes kills a compaction at each of its writes — the
// snapshot, the archive, the trim; before the write lands and after it —
// and checks that nothing was lost: the execution loads the same state
// from the reopened storage, and the next Compact finishes the move, with
// every event once, in the archive or in the log. fresh returns a
// factory over new storage (each case gets its own).
func RunCompactionCrashes(t *testing.T, fresh func(t *testing.T) CompactionFactory) {
	t.Helper()
	for k := 1; k <= 3; k++ {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("write%d/after=%v", k, after), func(t *testing.T) {
				compactionCrash(t, fresh(t), k, after)
			})
		}
	}
}

func compactionCrash(t *testing.T, f CompactionFactory, k int, after bool) {
	ctx := context.Background()
	var runs atomic.Int64
	const through = 9
	flow := gatedSteps(&runs, 8, 6)
	newRuntime := func(set store.Set) *loom.Runtime {
		t.Helper()
		rt, err := loom.New(loom.Config{Storage: set, Flows: []*loom.Flow{flow}, StickyParks: -1, TimerPoll: -1,
			Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	set, closeSet := f.Open(t)
	rt := newRuntime(set)
	id, err := rt.Start(ctx, "steps", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	rt.Close() // its park snapshot saved
	before := readAll(t, set.Events, id)
	want, _ := fold.Encode(fold.Fold(before))

	w := &crashingWrites{k: k, after: after}
	crashing := set
	crashing.Events = crashingEvents{EventStore: set.Events, trimmer: set.Events.(store.PrefixTrimmer), w: w}
	crashing.Snapshots = crashingSnapshots{SnapshotStore: set.Snapshots, w: w}
	crashing.Archive = crashingArchive{ArchiveStore: set.Archive, w: w}
	crt := newRuntime(crashing)
	if _, err := crt.Compact(ctx, id, through); !errors.Is(err, errCrashed) {
		t.Fatalf("the crashing compaction: %v", err)
	}
	crt.Close()
	if err := closeSet(); err != nil {
		t.Fatal(err)
	}

	set, closeSet = f.Open(t) // the next process
	defer func() {
		if err := closeSet(); err != nil {
			t.Error(err)
		}
	}()
	next := newRuntime(set)
	defer next.Close()
	check := func(when string) {
		t.Helper()
		st, err := next.LoadState(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got, _ := fold.Encode(st); string(got) != string(want) {
			t.Fatalf("%s: state\n%s\nwant\n%s", when, got, want)
		}
	}
	check("after the crash")
	if _, err := next.Compact(ctx, id, through); err != nil {
		t.Fatal(err)
	}
	check("after the finishing compaction")
	archived, err := set.Archive.ReadArchived(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	log := readAll(t, set.Events, id)
	assertEvents(t, "the archive", archived, before[1:through+1])
	assertEvents(t, "the log", log, append([]event.Envelope{before[0]}, before[through+1:]...))
}

var errCrashed = errors.New("storetest: the process died here")

// crashingWrites fails the k-th write of a compaction, before it lands or
// just after.
type crashingWrites struct {
	mu    sync.Mutex
	k, n  int
	after bool
}

func (w *crashingWrites) write(do func() error) error {
	w.mu.Lock()
	w.n++
	crash := w.n == w.k
	w.mu.Unlock()
	if !crash {
		return do()
	}
	if w.after {
		if err := do(); err != nil {
			return err
		}
	}
	return errCrashed
}

type crashingEvents struct {
	store.EventStore
	trimmer store.PrefixTrimmer
	w       *crashingWrites
}

func (e crashingEvents) TrimThrough(ctx context.Context, id string, through int64) error {
	return e.w.write(func() error { return e.trimmer.TrimThrough(ctx, id, through) })
}

func (e crashingEvents) TrimmedThrough(ctx context.Context, id string) (int64, error) {
	return e.trimmer.TrimmedThrough(ctx, id)
}

func (e crashingEvents) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	return store.ReadRange(ctx, e.EventStore, id, from, to)
}

type crashingSnapshots struct {
	store.SnapshotStore
	w *crashingWrites
}

func (s crashingSnapshots) Save(ctx context.Context, snap store.Snapshot) error {
	return s.w.write(func() error { return s.SnapshotStore.Save(ctx, snap) })
}

type crashingArchive struct {
	store.ArchiveStore
	w *crashingWrites
}

func (a crashingArchive) Archive(ctx context.Context, id string, evs []event.Envelope) error {
	return a.w.write(func() error { return a.ArchiveStore.Archive(ctx, id, evs) })
}
