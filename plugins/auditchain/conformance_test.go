package auditchain_test

import (
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// testKey is the HMAC key of the keyed tests: 32 fixed bytes.
var testKey = []byte("loom-auditchain-test-key-32bytes")

// wrap wraps inner or fails t.
func wrap(t testing.TB, inner store.EventStore, opts auditchain.Options) *auditchain.EventStore {
	t.Helper()
	s, err := auditchain.Wrap(inner, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The conformance kits through the chain: the wrapper breaks no store
// contract (reads give back exactly what was appended, every refusal is the
// inner store's typed error, every capability is there).

//
// Every link encodes and hashes its envelope, which under -race
// costs seconds for the kit's 16 MiB payloads; one run keeps the default
// cap, the others run with smallCap, as plugins/sqlite's SmallCap run does.

// smallCap is the payload cap of the quicker kit runs.
const smallCap = 64 << 10

var smallLimits = event.Limits{MaxPayloadBytes: smallCap}

func TestChainConformanceMemstore(t *testing.T) {
	t.Run("DefaultCap", func(t *testing.T) {
		storetest.RunEventStore(t, storetest.EventStoreFactory{New: func(t *testing.T) store.EventStore {
			return wrap(t, memstore.NewEventStore(), auditchain.Options{Key: testKey})
		}})
	})
	for name, opts := range map[string]auditchain.Options{
		"Unkeyed": {Limits: smallLimits},
		"Keyed":   {Key: testKey, Limits: smallLimits},
		"NoCache": {Key: testKey, Limits: smallLimits, CacheSize: -1},
	} {
		f := storetest.EventStoreFactory{New: func(t *testing.T) store.EventStore {
			return wrap(t, memstore.NewEventStore(memstore.WithLimits(smallLimits)), opts)
		}, MaxPayloadBytes: smallCap}
		t.Run(name+"/EventStore", func(t *testing.T) { storetest.RunEventStore(t, f) })
		t.Run(name+"/StatusIndex", func(t *testing.T) { storetest.RunStatusIndex(t, f) })
	}
}

func TestChainConformanceSQLite(t *testing.T) {
	opts := auditchain.Options{Key: testKey, Limits: smallLimits}
	open := func(t *testing.T, path string) store.EventStore {
		s, err := sqlite.OpenEventStore(path, sqlite.WithLimits(smallLimits))
		if err != nil {
			t.Fatal(err)
		}
		return wrap(t, s, opts)
	}
	f := storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore { return open(t, filepath.Join(t.TempDir(), "events.db")) },
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return open(t, closed.(*auditchain.EventStore).Inner().(*sqlite.EventStore).Path())
		},
		MaxPayloadBytes: smallCap,
	}
	t.Run("EventStore", func(t *testing.T) { storetest.RunEventStore(t, f) })
	t.Run("StatusIndex", func(t *testing.T) { storetest.RunStatusIndex(t, f) })
}
