package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// TestCompactThroughTheStoragePreset runs the compaction kit over the
// Storage preset on one schema, reconnected.
func TestCompactThroughTheStoragePreset(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	storetest.RunCompaction(t, storetest.CompactionFactory{Open: func(t *testing.T) (store.Set, func() error) {
		st, err := Storage(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return st.StoreSet(), st.Close
	}})
}

// TestCompactionCrashes kills a compaction at each of its writes on a
// schema and reconnects.
func TestCompactionCrashes(t *testing.T) {
	t.Parallel()
	storetest.RunCompactionCrashes(t, func(t *testing.T) storetest.CompactionFactory {
		schema := newSchema(t)
		return storetest.CompactionFactory{Open: func(t *testing.T) (store.Set, func() error) {
			st, err := Storage(context.Background(), testOptions(t, schema))
			if err != nil {
				t.Fatal(err)
			}
			return st.StoreSet(), st.Close
		}}
	})
}

// A schema of the release before compaction (migration 9) gets migration
// 10 (and every later one) on Open, and its old log is trimmed, archived and appended to like a
// new one; a deleted log starts again untrimmed.
func TestMigrationsCompactionOfAnOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	old := openDB(t, schema, func(o *Options) { o.migrations = schemaMigrations[:9] })
	writeAsBefore(t, old, map[string][]event.Envelope{"x": batch("x", 0, 10)})
	cur := openDB(t, schema)
	if got := ledger(t, schema); !slices.Equal(got, allVersions()) || got[len(got)-1] != len(schemaMigrations) {
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
