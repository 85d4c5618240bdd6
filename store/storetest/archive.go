package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ArchiveStoreFactory builds the stores RunArchiveStore checks.
type ArchiveStoreFactory struct {
	// New returns a fresh, empty archive; the kit closes it if it has a
	// Close method. It is called once per subtest.
	New func(t *testing.T) store.ArchiveStore
	// Reopen is optional: it reopens the durable storage behind an archive
	// New returned, after the kit closed it. When nil the Reopen subtest is
	// left out.
	Reopen func(t *testing.T, closed store.ArchiveStore) store.ArchiveStore
}

func (f ArchiveStoreFactory) open(t *testing.T) store.ArchiveStore {
	t.Helper()
	a := f.New(t)
	if a == nil {
		t.Fatal("storetest: ArchiveStoreFactory.New returned nil")
	}
	if c, ok := a.(interface{ Close() error }); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
				t.Errorf("storetest: Close at cleanup: %v", err)
			}
		})
	}
	return a
}

// RunArchiveStore runs the ArchiveStore conformance kit: a round trip and
// ranged reads; Archive idempotent for the same events and for an
// overlapping batch; a batch holding a different event at an archived
// sequence refused with *store.ArchiveConflictError, writing nothing of
// it; batches that are not one execution's contiguous run refused with
// *store.InvalidAppendError; executions kept apart; concurrent archivers
// of one batch leaving one copy; and Reopen when f.Reopen is set.
func RunArchiveStore(t *testing.T, f ArchiveStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: ArchiveStoreFactory.New is nil")
	}
	ctx := context.Background()
	read := func(t *testing.T, a store.ArchiveStore, exec string, from, to int64) []event.Envelope {
		t.Helper()
		evs, err := a.ReadArchived(ctx, exec, from, to)
		if err != nil {
			t.Fatalf("ReadArchived(%q, %d, %d): %v", exec, from, to, err)
		}
		return evs
	}
	archive := func(t *testing.T, a store.ArchiveStore, exec string, evs []event.Envelope) {
		t.Helper()
		if err := a.Archive(ctx, exec, evs); err != nil {
			t.Fatalf("Archive(%q, %v): %v", exec, sequencesOf(evs), err)
		}
	}
	t.Run("DeleteArchived", func(t *testing.T) {
		a := f.open(t)
		d, ok := a.(store.ArchiveDeleter)
		if !ok {
			t.Skip("the archive is not a store.ArchiveDeleter (optional)")
		}
		archive(t, a, "x", batchAt("x", 1, 5))
		archive(t, a, "y", batchAt("y", 1, 2))
		if err := d.DeleteArchived(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if evs := read(t, a, "x", 0, -1); len(evs) != 0 {
			t.Fatalf("after DeleteArchived: %v", sequencesOf(evs))
		}
		assertEvents(t, "the other execution", read(t, a, "y", 0, -1), batchAt("y", 1, 2))
		if err := d.DeleteArchived(ctx, "unknown"); err != nil {
			t.Fatalf("DeleteArchived of an unknown execution: %v", err)
		}
		// A reused id archives its own history: nothing of the deleted one
		// is left to conflict with.
		other := batchAt("x", 1, 2)
		for i := range other {
			other[i].Payload = []byte(`{"another":"life"}`)
		}
		archive(t, a, "x", other)
		assertEvents(t, "the reused id", read(t, a, "x", 0, -1), other)
	})
	t.Run("RoundTripAndRanges", func(t *testing.T) {
		a := f.open(t)
		archive(t, a, "x", batchAt("x", 1, 5))
		assertEvents(t, "all", read(t, a, "x", 0, -1), batchAt("x", 1, 5))
		assertEvents(t, "[2,4)", read(t, a, "x", 2, 4), batchAt("x", 2, 2))
		assertEvents(t, "[4,end)", read(t, a, "x", 4, -1), batchAt("x", 4, 2))
		if evs := read(t, a, "x", 9, -1); len(evs) != 0 {
			t.Fatalf("past the end: %v", sequencesOf(evs))
		}
		if evs := read(t, a, "unknown", 0, -1); len(evs) != 0 {
			t.Fatalf("unknown execution: %v", sequencesOf(evs))
		}
		archive(t, a, "x", nil) // an empty batch is a no-op
	})
	t.Run("Idempotent", func(t *testing.T) {
		a := f.open(t)
		archive(t, a, "x", batchAt("x", 1, 5))
		archive(t, a, "x", batchAt("x", 1, 5))
		archive(t, a, "x", batchAt("x", 4, 4)) // 4 and 5 again, 6 and 7 new
		assertEvents(t, "after the repeats", read(t, a, "x", 0, -1), batchAt("x", 1, 7))
	})
	t.Run("ConflictWritesNothing", func(t *testing.T) {
		a := f.open(t)
		archive(t, a, "x", batchAt("x", 1, 3))
		batch := batchAt("x", 3, 3)
		batch[0].Payload = json.RawMessage(`{"edited":true}`)
		err := a.Archive(ctx, "x", batch)
		var conflict *store.ArchiveConflictError
		if !errors.As(err, &conflict) || conflict.Sequence != 3 || conflict.ExecutionID != "x" {
			t.Fatalf("Archive of an edited event: %v, want *store.ArchiveConflictError at #3", err)
		}
		assertEvents(t, "after the refusal", read(t, a, "x", 0, -1), batchAt("x", 1, 3))
	})
	t.Run("InvalidBatchesWriteNothing", func(t *testing.T) {
		a := f.open(t)
		gap := append(batchAt("x", 1, 2), envelopeAt("x", 5))
		other := append(batchAt("x", 1, 2), envelopeAt("y", 3))
		bad := batchAt("x", 1, 2)
		bad[1].ID = ""
		for name, batch := range map[string][]event.Envelope{"a gap": gap, "another execution": other, "an invalid envelope": bad} { //loom:order-independent independent cases
			var invalid *store.InvalidAppendError
			if err := a.Archive(ctx, "x", batch); !errors.As(err, &invalid) {
				t.Fatalf("%s: %v, want *store.InvalidAppendError", name, err)
			}
		}
		if evs := read(t, a, "x", 0, -1); len(evs) != 0 {
			t.Fatalf("a refused batch left %v", sequencesOf(evs))
		}
	})
	t.Run("ExecutionsApart", func(t *testing.T) {
		a := f.open(t)
		archive(t, a, "x", batchAt("x", 1, 2))
		archive(t, a, "y", batchAt("y", 1, 3))
		assertEvents(t, "x", read(t, a, "x", 0, -1), batchAt("x", 1, 2))
		assertEvents(t, "y", read(t, a, "y", 0, -1), batchAt("y", 1, 3))
	})
	t.Run("ConcurrentArchivers", func(t *testing.T) {
		a := f.open(t)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- a.Archive(ctx, "x", batchAt("x", 1, 20)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a concurrent Archive of the same batch: %v", err)
			}
		}
		assertEvents(t, "after 8 archivers", read(t, a, "x", 0, -1), batchAt("x", 1, 20))
	})
	if f.Reopen != nil {
		t.Run("Reopen", func(t *testing.T) {
			a := f.New(t)
			archive(t, a, "x", batchAt("x", 1, 4))
			if c, ok := a.(interface{ Close() error }); ok {
				closeStore(t, c)
			}
			b := f.Reopen(t, a)
			if c, ok := b.(interface{ Close() error }); ok {
				t.Cleanup(func() { _ = c.Close() })
			}
			assertEvents(t, "after reopening", read(t, b, "x", 0, -1), batchAt("x", 1, 4))
		})
	}
}

// RunPrefixTrimmer runs the store.PrefixTrimmer kit against the event
// stores f builds (which must implement it): TrimThrough removes 1..through
// and keeps the start and the tail, reads skip the range, the length and
// the listing are unchanged and appends go on; repeats are no-ops; a
// through below 1, at the last event or past it, or of an unknown
// execution is refused with *store.TrimError removing nothing; CopyPrefix
// (when offered) refuses a point inside the trimmed range and carries the
// trim point past it; and the trim point survives Reopen when f.Reopen is
// set.
func RunPrefixTrimmer(t *testing.T, f EventStoreFactory) {
	t.Helper()
	ctx := context.Background()
	open := func(t *testing.T) (store.EventStore, store.PrefixTrimmer) {
		t.Helper()
		s := openStore(t, "EventStoreFactory.New", f.New)
		tr, ok := s.(store.PrefixTrimmer)
		if !ok {
			t.Fatalf("storetest: %T is not a store.PrefixTrimmer", s)
		}
		return s, tr
	}
	trimmedLog := func() []event.Envelope { // the log of "x" after TrimThrough(4) of 10 events
		return append([]event.Envelope{envelopeAt("x", 0)}, batchAt("x", 5, 5)...)
	}
	t.Run("TrimKeepsTheStartAndTheTail", func(t *testing.T) {
		s, tr := open(t)
		mustAppend(t, s, "x", 0, batchAt("x", 0, 10))
		if err := tr.TrimThrough(ctx, "x", 4); err != nil {
			t.Fatal(err)
		}
		assertLog(t, s, "x", trimmedLog())
		if got, err := tr.TrimmedThrough(ctx, "x"); err != nil || got != 4 {
			t.Fatalf("TrimmedThrough: %d %v", got, err)
		}
		if rr, ok := s.(store.RangeReader); ok {
			for _, c := range []struct {
				from, to int64
				want     []event.Envelope
			}{{0, 3, batchAt("x", 0, 1)}, {2, 7, batchAt("x", 5, 2)}, {1, 5, nil}, {5, 10, batchAt("x", 5, 5)}} {
				got, err := rr.ReadRange(ctx, "x", c.from, c.to)
				if err != nil {
					t.Fatal(err)
				}
				assertEvents(t, "ReadRange", got, c.want)
			}
		}
		page, err := s.ListExecutions(ctx, "", 10)
		if err != nil || len(page.Executions) != 1 || page.Executions[0].Length != 10 {
			t.Fatalf("listing after the trim: %+v %v", page, err)
		}
		var conflict *store.SequenceConflictError
		if err := s.Append(ctx, "x", 5, batchAt("x", 5, 1)); !errors.As(err, &conflict) {
			t.Fatalf("an append at a trimmed position: %v", err)
		}
		mustAppend(t, s, "x", 10, batchAt("x", 10, 1))
		assertLog(t, s, "x", append(trimmedLog(), envelopeAt("x", 10)))
		if err := tr.TrimThrough(ctx, "x", 3); err != nil {
			t.Fatalf("a trim below the trim point: %v", err)
		}
		if got, _ := tr.TrimmedThrough(ctx, "x"); got != 4 {
			t.Fatalf("a trim below the trim point moved it to %d", got)
		}
		if err := tr.TrimThrough(ctx, "x", 7); err != nil {
			t.Fatal(err)
		}
		assertLog(t, s, "x", append([]event.Envelope{envelopeAt("x", 0)}, batchAt("x", 8, 3)...))
		if got, err := tr.TrimmedThrough(ctx, "unknown"); err != nil || got != 0 {
			t.Fatalf("TrimmedThrough of an unknown execution: %d %v", got, err)
		}
	})
	t.Run("RefusalsRemoveNothing", func(t *testing.T) {
		s, tr := open(t)
		mustAppend(t, s, "x", 0, batchAt("x", 0, 10))
		for _, c := range []struct {
			exec    string
			through int64
		}{{"x", 0}, {"x", -1}, {"x", 9}, {"x", 12}, {"unknown", 3}} {
			var te *store.TrimError
			if err := tr.TrimThrough(ctx, c.exec, c.through); !errors.As(err, &te) {
				t.Fatalf("TrimThrough(%q, %d): %v, want *store.TrimError", c.exec, c.through, err)
			}
		}
		assertLog(t, s, "x", batchAt("x", 0, 10))
	})
	if _, ok := openStore(t, "EventStoreFactory.New", f.New).(store.PrefixCopier); ok {
		t.Run("CopyPrefixAfterATrim", func(t *testing.T) {
			s, tr := open(t)
			mustAppend(t, s, "x", 0, batchAt("x", 0, 10))
			if err := tr.TrimThrough(ctx, "x", 4); err != nil {
				t.Fatal(err)
			}
			pc := s.(store.PrefixCopier)
			var invalid *store.InvalidAppendError
			if err := pc.CopyPrefix(ctx, "x", "inside", 3); !errors.As(err, &invalid) {
				t.Fatalf("a copy through a trimmed sequence: %v", err)
			}
			if evs := readAll(t, s, "inside"); len(evs) != 0 {
				t.Fatalf("a refused copy wrote %v", sequencesOf(evs))
			}
			if err := pc.CopyPrefix(ctx, "x", "fork", 6); err != nil {
				t.Fatal(err)
			}
			want := []event.Envelope{envelopeAt("x", 0), envelopeAt("x", 5), envelopeAt("x", 6)}
			for i := range want {
				want[i].ExecutionID = "fork"
			}
			assertLog(t, s, "fork", want)
			if got, err := tr.TrimmedThrough(ctx, "fork"); err != nil || got != 4 {
				t.Fatalf("the copy's trim point: %d %v", got, err)
			}
			if err := pc.CopyPrefix(ctx, "x", "start-only", 0); err != nil {
				t.Fatal(err)
			}
			if got, err := tr.TrimmedThrough(ctx, "start-only"); err != nil || got != 0 {
				t.Fatalf("a copy of #0 alone has trim point %d (%v), want 0", got, err)
			}
		})
	}
	if f.Reopen != nil {
		t.Run("Reopen", func(t *testing.T) {
			s := f.New(t)
			mustAppend(t, s, "x", 0, batchAt("x", 0, 10))
			if err := s.(store.PrefixTrimmer).TrimThrough(ctx, "x", 4); err != nil {
				t.Fatal(err)
			}
			closeStore(t, s)
			r := openStore(t, "EventStoreFactory.Reopen", func(t *testing.T) store.EventStore { return f.Reopen(t, s) })
			assertLog(t, r, "x", trimmedLog())
			if got, err := r.(store.PrefixTrimmer).TrimmedThrough(ctx, "x"); err != nil || got != 4 {
				t.Fatalf("TrimmedThrough after reopening: %d %v", got, err)
			}
		})
	}
}
