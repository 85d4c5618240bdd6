package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/event"
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

// envelope returns a valid single event of exec at seq.
func envelope(exec string, seq int64) event.Envelope {
	return event.Envelope{
		ID:          exec + "#" + strconv.FormatInt(seq, 10),
		WorkflowID:  "wf",
		ExecutionID: exec,
		Type:        "TEST_EVENT",
		Sequence:    seq,
		Timestamp:   1_700_000_000_000 + seq,
		Payload:     json.RawMessage(`{"exec":"` + exec + `","seq":` + strconv.FormatInt(seq, 10) + `}`),
	}
}

// batch returns n contiguous envelopes of exec from seq.
func batch(exec string, from int64, n int) []event.Envelope {
	out := make([]event.Envelope, n)
	for i := range out {
		out[i] = envelope(exec, from+int64(i))
	}
	return out
}

func mustAppend(t testing.TB, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	if err := s.Append(context.Background(), exec, expected, evs); err != nil {
		t.Fatalf("Append(%q, %d): %v", exec, expected, err)
	}
}

func logLength(t testing.TB, s store.EventStore, exec string) int {
	t.Helper()
	evs, err := s.ReadFrom(context.Background(), exec, 0)
	if err != nil {
		t.Fatalf("ReadFrom(%q): %v", exec, err)
	}
	for i, e := range evs {
		if e.Sequence != int64(i) {
			t.Fatalf("log of %q: event %d has sequence %d", exec, i, e.Sequence)
		}
	}
	return len(evs)
}

func isConflict(err error) bool {
	var ce *store.SequenceConflictError
	return errors.As(err, &ce)
}
