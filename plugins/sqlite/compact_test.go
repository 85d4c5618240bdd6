package sqlite_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

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

// openCompactRuntime opens the Storage preset on path and a runtime of
// "steps" over it; both close at cleanup, the runtime first.
func openCompactRuntime(t *testing.T, path string, flow *loom.Flow) (*loom.Runtime, sqlite.Stores) {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{flow}, StickyParks: -1, TimerPoll: -1,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, st
}

// TestCompactThroughTheStoragePreset: a parked execution is compacted
// through the preset's archive and trimmer, and a new runtime over the
// reopened file loads the same state, resumes it and completes it without
// running a compacted step again; the moved events are in the archive.
func TestCompactThroughTheStoragePreset(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	var runs atomic.Int64
	const steps, gateAt = 8, 6
	rt, st := openCompactRuntime(t, path, gatedSteps(&runs, steps, gateAt))
	id, err := rt.Start(ctx, "steps", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	before, err := store.Read(ctx, st.Events, id)
	if err != nil {
		t.Fatal(err)
	}
	stateBefore, err := rt.LoadState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	const through = 9
	if res, err := rt.Compact(ctx, id, through); err != nil || res.Through != through || res.Archived != through {
		t.Fatalf("Compact: %+v %v", res, err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	next, reopened := openCompactRuntime(t, path, gatedSteps(&runs, steps, gateAt))
	log, err := store.Read(ctx, reopened.Events, id)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "the log after compaction", log, append([]event.Envelope{before[0]}, before[through+1:]...))
	if got, err := reopened.Events.(store.PrefixTrimmer).TrimmedThrough(ctx, id); err != nil || got != through {
		t.Fatalf("TrimmedThrough after reopening: %d %v", got, err)
	}
	archived, err := next.ReadArchived(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "the archive", archived, before[1:through+1])
	st2, err := next.LoadState(ctx, id)
	if err != nil || encodedState(t, st2) != encodedState(t, stateBefore) {
		t.Fatalf("state after reopening: %v\n%s\nwant\n%s", err, encodedState(t, st2), encodedState(t, stateBefore))
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

func sameEvents(t *testing.T, what string, got, want []event.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, gerr := event.Encode(got[i])
		w, werr := event.Encode(want[i])
		if gerr != nil || werr != nil || string(g) != string(w) {
			t.Fatalf("%s: event %d:\n%s\nwant\n%s (%v %v)", what, i, g, w, gerr, werr)
		}
	}
}

func encodedState(t *testing.T, s fold.State) string {
	t.Helper()
	b, err := fold.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
