package postgres

import (
	"context"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// The conformance kits run against stores that own their DB (so the kit's
// Close stops the DB's goroutines and closes its pool, which the kit checks
// with goleak), each subtest on a fresh schema of the test server; Reopen
// opens a new DB, with a new pool, on the same schema. None of these tests
// is parallel: the kits' leak checks must not see other tests' goroutines.

func TestEventStoreConformance(t *testing.T) {
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return openEventStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return openEventStore(t, closed.(*EventStore).Schema())
		},
	})
}

func TestEventStoreConformanceSmallCap(t *testing.T) {
	const limit = 64 << 10
	small := func(o *Options) { o.Limits = event.Limits{MaxPayloadBytes: limit} }
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return openEventStore(t, newSchema(t), small) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return openEventStore(t, closed.(*EventStore).Schema(), small)
		},
		MaxPayloadBytes: limit,
	})
}

func TestStatusIndexConformance(t *testing.T) {
	storetest.RunStatusIndex(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return openEventStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return openEventStore(t, closed.(*EventStore).Schema())
		},
	})
}

func TestExecutionCatalogConformance(t *testing.T) {
	storetest.RunExecutionCatalog(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return openEventStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return openEventStore(t, closed.(*EventStore).Schema())
		},
	})
}

func TestSnapshotStoreConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.SnapshotStore {
		s, err := OpenSnapshotStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(t *testing.T) store.SnapshotStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.SnapshotStore) store.SnapshotStore {
			return open(t, closed.(*SnapshotStore).Schema())
		},
	})
}

func TestBranchRegistryConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.BranchRegistry {
		r, err := OpenBranchRegistry(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{
		New: func(t *testing.T) store.BranchRegistry { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.BranchRegistry) store.BranchRegistry {
			return open(t, closed.(*BranchRegistry).Schema())
		},
	})
}

func TestTimerStoreConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.TimerStore {
		s, err := OpenTimerStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunTimerStore(t, storetest.TimerStoreFactory{
		New: func(t *testing.T) store.TimerStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.TimerStore) store.TimerStore {
			return open(t, closed.(*TimerStore).Schema())
		},
	})
}

func TestLeaseStoreConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.LeaseStore {
		s, err := OpenLeaseStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunLeaseStore(t, storetest.LeaseStoreFactory{
		New: func(t *testing.T) store.LeaseStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.LeaseStore) store.LeaseStore {
			return open(t, closed.(*LeaseStore).Schema())
		},
	})
}

func TestContentStoreConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.ContentStore {
		s, err := OpenContentStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New: func(t *testing.T) store.ContentStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.ContentStore) store.ContentStore {
			return open(t, closed.(*ContentStore).Schema())
		},
		Count: func(t *testing.T, s store.ContentStore) int {
			return int(adminQueryInt(t, `SELECT count(*) FROM `+quoted(s.(*ContentStore).Schema())+`.content`))
		},
	})
}

// openEventStore opens an EventStore owning a DB on schema.
func openEventStore(t *testing.T, schema string, edit ...func(*Options)) store.EventStore {
	t.Helper()
	s, err := OpenEventStore(context.Background(), testOptions(t, schema, edit...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestArchiveStoreConformance(t *testing.T) {
	open := func(t *testing.T, schema string) store.ArchiveStore {
		a, err := OpenArchiveStore(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	storetest.RunArchiveStore(t, storetest.ArchiveStoreFactory{
		New: func(t *testing.T) store.ArchiveStore { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.ArchiveStore) store.ArchiveStore {
			return open(t, closed.(*ArchiveStore).Schema())
		},
	})
}

func TestPrefixTrimmerConformance(t *testing.T) {
	storetest.RunPrefixTrimmer(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return openEventStore(t, newSchema(t)) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return openEventStore(t, closed.(*EventStore).Schema())
		},
	})
}
