package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
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

// openCompactRuntime opens the Storage preset on schema and a runtime of
// flow over it; both close at cleanup, the runtime first.
func openCompactRuntime(t *testing.T, schema string, flow *loom.Flow) (*loom.Runtime, Stores) {
	t.Helper()
	st, err := Storage(context.Background(), testOptions(t, schema))
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
// through the preset's archive and trimmer, and a new runtime over a new
// DB on the schema loads the same state, resumes it and completes it
// without running a compacted step again; the moved events are in the
// archive.
func TestCompactThroughTheStoragePreset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	var runs atomic.Int64
	const steps, gateAt = 8, 6
	rt, st := openCompactRuntime(t, schema, gatedSteps(&runs, steps, gateAt))
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

	next, reopened := openCompactRuntime(t, schema, gatedSteps(&runs, steps, gateAt))
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

// A schema of the release before compaction (migration 9) gets migration
// 10 on Open, and its old log is trimmed, archived and appended to like a
// new one; a deleted log starts again untrimmed.
func TestMigrationsCompactionOfAnOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	old := openDB(t, schema, func(o *Options) { o.migrations = schemaMigrations[:9] })
	writeAsBefore(t, old, map[string][]event.Envelope{"x": batch("x", 0, 10)})
	cur := openDB(t, schema)
	if got := ledger(t, schema); !slices.Equal(got, allVersions()) || got[len(got)-1] != 10 {
		t.Fatalf("ledger after the upgrade = %v, want %v", got, allVersions())
	}
	s, a := cur.EventStore(), cur.ArchiveStore()
	if got, err := s.TrimmedThrough(ctx, "x"); err != nil || got != 0 {
		t.Fatalf("TrimmedThrough of an old log: %d %v", got, err)
	}
	if err := a.Archive(ctx, "x", batch("x", 1, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimThrough(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "x", 10, batch("x", 10, 1))
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "the old log trimmed", got, append(batch("x", 0, 1), batch("x", 5, 6)...))
	archived, err := a.ReadArchived(ctx, "x", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, "the archive", archived, batch("x", 1, 4))

	if err := s.CopyPrefix(ctx, "x", "start", 0); err != nil {
		t.Fatal(err)
	}
	if through, err := s.TrimmedThrough(ctx, "start"); err != nil || through != 0 {
		t.Fatalf("the trim point of a copy of #0 only: %d %v", through, err)
	}
	if err := s.DeleteExecution(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if through, err := s.TrimmedThrough(ctx, "x"); err != nil || through != 0 {
		t.Fatalf("the trim point of a deleted log: %d %v", through, err)
	}
	mustAppend(t, s, "x", 0, batch("x", 0, 3))
	if through, err := s.TrimmedThrough(ctx, "x"); err != nil || through != 0 {
		t.Fatalf("the trim point of a recreated log: %d %v", through, err)
	}
	if got := logOf(t, s, "x"); len(got) != 3 {
		t.Fatalf("the recreated log holds %d events, want 3", len(got))
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
