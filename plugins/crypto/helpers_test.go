package crypto_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
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
