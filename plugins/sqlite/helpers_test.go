package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
	"github.com/loom-kernel/loom/store"
)

func eventLimits(n int) event.Limits { return event.Limits{MaxPayloadBytes: n} }

// mustOpenEventStore opens an EventStore owning path.
func mustOpenEventStore(t testing.TB, path string, opts ...Option) *EventStore {
	t.Helper()
	s, err := OpenEventStore(path, opts...)
	if err != nil {
		t.Fatalf("OpenEventStore: %v", err)
	}
	return s
}

// openTestDB opens a DB over a fresh file and closes it at cleanup.
func openTestDB(t testing.TB, opts ...Option) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "loom.db"), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// batch returns n contiguous envelopes of exec from seq.
func batch(exec string, from int64, n int) []event.Envelope { return writertest.Batch(exec, from, n) }

func mustAppend(t testing.TB, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	writertest.MustAppend(t, s, exec, expected, evs)
}

func logLength(t testing.TB, s store.EventStore, exec string) int {
	t.Helper()
	return writertest.LogLength(t, s, exec)
}

func isConflict(err error) bool {
	var ce *store.SequenceConflictError
	return errors.As(err, &ce)
}
