package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// The conformance kits run against stores that own their file (so the kit's
// Close closes the database and its goroutines, which the kit checks with
// goleak), and Reopen opens the same file again from disk.

func TestEventStoreConformance(t *testing.T) {
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return mustOpenEventStore(t, filepath.Join(t.TempDir(), "events.db"))
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return mustOpenEventStore(t, closed.(*EventStore).Path())
		},
	})
}

func TestEventStoreConformanceSmallCap(t *testing.T) {
	const limit = 64 << 10
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return mustOpenEventStore(t, filepath.Join(t.TempDir(), "events.db"), WithLimits(eventLimits(limit)))
		},
		MaxPayloadBytes: limit,
	})
}

func TestStatusIndexConformance(t *testing.T) {
	storetest.RunStatusIndex(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return mustOpenEventStore(t, filepath.Join(t.TempDir(), "events.db"))
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return mustOpenEventStore(t, closed.(*EventStore).Path())
		},
	})
}

func TestExecutionCatalogConformance(t *testing.T) {
	storetest.RunExecutionCatalog(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return mustOpenEventStore(t, filepath.Join(t.TempDir(), "events.db"))
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return mustOpenEventStore(t, closed.(*EventStore).Path())
		},
	})
}

func TestSnapshotStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.SnapshotStore {
		s, err := OpenSnapshotStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(t *testing.T) store.SnapshotStore { return open(t, filepath.Join(t.TempDir(), "snapshots.db")) },
		Reopen: func(t *testing.T, closed store.SnapshotStore) store.SnapshotStore {
			return open(t, closed.(*SnapshotStore).Path())
		},
	})
}

func TestBranchRegistryConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.BranchRegistry {
		r, err := OpenBranchRegistry(path)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{
		New: func(t *testing.T) store.BranchRegistry { return open(t, filepath.Join(t.TempDir(), "refs.db")) },
		Reopen: func(t *testing.T, closed store.BranchRegistry) store.BranchRegistry {
			return open(t, closed.(*BranchRegistry).Path())
		},
	})
}

func TestTimerStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.TimerStore {
		s, err := OpenTimerStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunTimerStore(t, storetest.TimerStoreFactory{
		New: func(t *testing.T) store.TimerStore { return open(t, filepath.Join(t.TempDir(), "timers.db")) },
		Reopen: func(t *testing.T, closed store.TimerStore) store.TimerStore {
			return open(t, closed.(*TimerStore).Path())
		},
	})
}

func TestLeaseStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.LeaseStore {
		s, err := OpenLeaseStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunLeaseStore(t, storetest.LeaseStoreFactory{
		New: func(t *testing.T) store.LeaseStore { return open(t, filepath.Join(t.TempDir(), "leases.db")) },
		Reopen: func(t *testing.T, closed store.LeaseStore) store.LeaseStore {
			return open(t, closed.(*LeaseStore).Path())
		},
	})
}

func TestContentStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.ContentStore {
		s, err := OpenContentStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New: func(t *testing.T) store.ContentStore { return open(t, filepath.Join(t.TempDir(), "content.db")) },
		Reopen: func(t *testing.T, closed store.ContentStore) store.ContentStore {
			return open(t, closed.(*ContentStore).Path())
		},
		Count: func(t *testing.T, s store.ContentStore) int { return countContentRows(t, s.(*ContentStore).DB()) },
	})
}

// TestTimerDueDefaultLimit: a limit below 1 returns DefaultDueLimit timers.
func TestTimerDueDefaultLimit(t *testing.T) {
	s := openTestDB(t).TimerStore()
	seedTimers(t, s.DB(), DefaultDueLimit+1, 7)
	for _, limit := range []int{0, -1} {
		got, err := s.Due(context.Background(), 7, limit)
		if err != nil || len(got) != DefaultDueLimit {
			t.Fatalf("Due(7, %d) = %d timers, %v; want %d", limit, len(got), err, DefaultDueLimit)
		}
	}
}

// TestTimerDueReadsTheIndexInOrder: the Due query walks timers_due and
// needs no sort, so a page costs its own length, not a sort of every timer.
func TestTimerDueReadsTheIndexInOrder(t *testing.T) {
	db := openTestDB(t)
	rows, err := db.read.QueryContext(context.Background(),
		`EXPLAIN QUERY PLAN SELECT `+timerCols+` FROM timers WHERE wake_at <= ? ORDER BY wake_at, key LIMIT ?`, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(errors.Join(err, rows.Close()))
		}
		plan = append(plan, detail)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "; ")
	if !strings.Contains(joined, "USING INDEX timers_due") || strings.Contains(joined, "TEMP B-TREE") {
		t.Fatalf("Due's query plan is %q; want a search of timers_due and no sort", joined)
	}
}

// TestStorageCarriesTimers: the preset's Timers shares the file with the
// other stores, closes with Stores.Close and keeps its timers across it.
func TestStorageCarriesTimers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	want := store.Timer{Key: "sleep/exec-1", ExecutionID: "exec-1", WakeAt: 42, Payload: []byte(`{"on":"sleep"}`)}
	st, err := Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Timers.Put(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Timers.Get(ctx, want.Key); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Stores.Close = %v, want store.ErrClosed", err)
	}
	st, err = Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, found, err := st.Timers.Get(ctx, want.Key)
	if err != nil || !found || got.WakeAt != want.WakeAt || string(got.Payload) != string(want.Payload) || got.ExecutionID != want.ExecutionID {
		t.Fatalf("Get after reopen = %+v, %v, %v; want %+v", got, found, err, want)
	}
}

// TestStorageCarriesLeases: the preset's Leases shares the file with the
// other stores, closes with Stores.Close and keeps its leases across it.
func TestStorageCarriesLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	st, err := Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.Leases.Acquire(ctx, "exec-1", "node-a", 100, 1_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Leases.Get(ctx, "exec-1"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Stores.Close = %v, want store.ErrClosed", err)
	}
	st, err = Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	got, found, err := st.Leases.Get(ctx, "exec-1")
	if err != nil || !found || got != want {
		t.Fatalf("Get after reopen = %+v, %v, %v; want %+v", got, found, err, want)
	}
}

func TestArchiveStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) store.ArchiveStore {
		a, err := OpenArchiveStore(path)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	storetest.RunArchiveStore(t, storetest.ArchiveStoreFactory{
		New: func(t *testing.T) store.ArchiveStore { return open(t, filepath.Join(t.TempDir(), "archive.db")) },
		Reopen: func(t *testing.T, closed store.ArchiveStore) store.ArchiveStore {
			return open(t, closed.(*ArchiveStore).Path())
		},
	})
}

func TestPrefixTrimmerConformance(t *testing.T) {
	storetest.RunPrefixTrimmer(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return mustOpenEventStore(t, filepath.Join(t.TempDir(), "events.db"))
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return mustOpenEventStore(t, closed.(*EventStore).Path())
		},
	})
}
