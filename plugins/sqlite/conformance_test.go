package sqlite

import (
	"path/filepath"
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
