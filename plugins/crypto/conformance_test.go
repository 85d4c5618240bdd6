package crypto_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// kitFields seals the kits' own event type (its "exec" member) on top of
// the default table, so the byte-exactness, copy, fencing and concurrency
// checks of the kits run over sealed envelopes, not only over frames.
func kitFields() *crypto.FieldTable {
	f := crypto.DefaultFields()
	f.ByType["STORETEST_EVENT"] = []string{"exec"}
	return &f
}

func kitOptions() crypto.EventStoreOptions {
	return crypto.EventStoreOptions{Subject: crypto.FixedSubject("kit-subject"), Fields: kitFields()}
}

// The kits run through the wrapper over memstore and over a real SQLite
// file; the keystore lives in the test's directory and survives a Reopen.

func TestEventStoreConformanceMemstore(t *testing.T) {
	storetest.RunEventStore(t, sealedMemstoreEvents())
}

func TestEventStoreConformanceSQLite(t *testing.T) {
	paths := map[store.EventStore]string{}
	open := func(t *testing.T, dir string) store.EventStore {
		inner, err := sqlite.OpenEventStore(filepath.Join(dir, "events.db"))
		if err != nil {
			t.Fatal(err)
		}
		s := wrapEvents(t, inner, openKeys(t, dir), kitOptions())
		paths[s] = dir
		return s
	}
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New:    func(t *testing.T) store.EventStore { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore { return open(t, paths[closed]) },
	})
}

func TestStatusIndexConformanceMemstore(t *testing.T) {
	storetest.RunStatusIndex(t, sealedMemstoreEvents())
}

func TestStatusIndexConformanceSQLite(t *testing.T) {
	storetest.RunStatusIndex(t, sealedSQLiteEvents())
}

// kitSubjects seals every kit snapshot under one subject (the kits write
// snapshots of executions that have no log).
var kitSubjects = crypto.SubjectResolverFunc(func(context.Context, string) (string, error) { return "kit-subject", nil })

func wrapSnapshots(t *testing.T, inner store.SnapshotStore, keys crypto.KeyStore) store.SnapshotStore {
	t.Helper()
	s, err := crypto.NewSnapshotStore(inner, keys, kitSubjects, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotStoreConformanceMemstore(t *testing.T) {
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(t *testing.T) store.SnapshotStore {
			return wrapSnapshots(t, memstore.NewSnapshotStore(), openKeys(t, t.TempDir()))
		},
	})
}

func TestSnapshotStoreConformanceSQLite(t *testing.T) {
	paths := map[store.SnapshotStore]string{}
	open := func(t *testing.T, dir string) store.SnapshotStore {
		inner, err := sqlite.OpenSnapshotStore(filepath.Join(dir, "snapshots.db"))
		if err != nil {
			t.Fatal(err)
		}
		s := wrapSnapshots(t, inner, openKeys(t, dir))
		paths[s] = dir
		return s
	}
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New:    func(t *testing.T) store.SnapshotStore { return open(t, t.TempDir()) },
		Reopen: func(t *testing.T, closed store.SnapshotStore) store.SnapshotStore { return open(t, paths[closed]) },
	})
}

func wrapContent(t *testing.T, inner store.ContentStore, dir string) store.ContentStore {
	t.Helper()
	s, err := crypto.NewContentStore(inner, openKeys(t, dir), crypto.ContentStoreOptions{
		IndexPath: filepath.Join(dir, "content.index"), DefaultSubject: "kit-subject"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContentStoreConformanceMemstore(t *testing.T) {
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New:      func(t *testing.T) store.ContentStore { return wrapContent(t, memstore.NewContentStore(), t.TempDir()) },
		MaxBytes: store.MaxContentBytes - 28,
	})
}

func TestContentStoreConformanceSQLite(t *testing.T) {
	paths := map[store.ContentStore]string{}
	open := func(t *testing.T, dir string) store.ContentStore {
		inner, err := sqlite.OpenContentStore(filepath.Join(dir, "content.db"))
		if err != nil {
			t.Fatal(err)
		}
		s := wrapContent(t, inner, dir)
		paths[s] = dir
		return s
	}
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New:      func(t *testing.T) store.ContentStore { return open(t, t.TempDir()) },
		Reopen:   func(t *testing.T, closed store.ContentStore) store.ContentStore { return open(t, paths[closed]) },
		MaxBytes: store.MaxContentBytes - 28,
	})
}
