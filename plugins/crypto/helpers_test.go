package crypto_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// testMaster is a fixed master key: tests are deterministic about keys,
// while salts, key ids and nonces come from crypto/rand.
var testMaster = bytes.Repeat([]byte{0x42}, crypto.MasterKeyBytes)

// fixedClock is the injected clock of every test keystore.
func fixedClock() time.Time { return time.UnixMilli(1_700_000_000_000) }

// openKeys opens a file keystore in dir under testMaster.
func openKeys(t testing.TB, dir string) *crypto.FileKeyStore {
	t.Helper()
	ks, err := crypto.OpenFileKeyStore(filepath.Join(dir, "keys.json"), crypto.FileKeyStoreOptions{MasterKey: testMaster, Clock: fixedClock})
	if err != nil {
		t.Fatalf("OpenFileKeyStore: %v", err)
	}
	t.Cleanup(func() { _ = ks.Close() }) // a test may have closed it
	return ks
}

// wrapEvents wraps inner and fails the test on a refusal.
func wrapEvents(t testing.TB, inner store.EventStore, keys crypto.KeyStore, opts crypto.EventStoreOptions) *crypto.EventStore {
	t.Helper()
	s, err := crypto.NewEventStore(inner, keys, opts)
	if err != nil {
		t.Fatalf("NewEventStore: %v", err)
	}
	return s
}

// sealedMemstoreEvents builds, per kit subtest, a sealing event store over
// memstore with a keystore of its own.
func sealedMemstoreEvents() storetest.EventStoreFactory {
	return storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			return wrapEvents(t, memstore.NewEventStore(), openKeys(t, t.TempDir()), kitOptions())
		},
	}
}

// sealedSQLiteEvents builds, per kit subtest, a sealing event store over a
// fresh SQLite file with a keystore beside it.
func sealedSQLiteEvents() storetest.EventStoreFactory {
	return storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			dir := t.TempDir()
			inner, err := sqlite.OpenEventStore(filepath.Join(dir, "events.db"))
			if err != nil {
				t.Fatal(err)
			}
			return wrapEvents(t, inner, openKeys(t, dir), kitOptions())
		},
	}
}
