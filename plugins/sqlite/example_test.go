package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// Storage opens the event log, snapshots and refs of one file; Close closes
// them together.
func ExampleStorage() {
	dir, err := os.MkdirTemp("", "loom-example")
	if err != nil {
		panic(err)
	}
	defer removeAll(dir)

	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(dir, "loom.db")})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()

	ctx := context.Background()
	started := event.Envelope{
		ID: "evt-0", WorkflowID: "greet", ExecutionID: "run-1", Type: event.ExecutionStarted,
		Sequence: 0, Timestamp: 1_700_000_000_000, Payload: json.RawMessage(`{"name": "Ada"}`),
	}
	if err := st.Events.Append(ctx, "run-1", 0, []event.Envelope{started}); err != nil {
		panic(err)
	}
	// A stale writer is refused, and nothing is written.
	err = st.Events.Append(ctx, "run-1", 0, []event.Envelope{started})
	fmt.Println("stale append refused:", err != nil)

	evs, err := st.Events.ReadFrom(ctx, "run-1", 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(evs[0].Type, string(evs[0].Payload))

	ref, err := st.Branches.CreateRef(ctx, "main", "run-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(ref.Name, "->", ref.ExecutionID, "version", ref.Version)
	// Output:
	// stale append refused: true
	// EXECUTION_STARTED {"name": "Ada"}
	// main -> run-1 version 1
}

// Open shares one database between stores; a store taken from the DB is a
// view that DB.Close closes.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "loom-example")
	if err != nil {
		panic(err)
	}
	defer removeAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "loom.db"), sqlite.WithSynchronous(sqlite.SyncNormal))
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()

	ctx := context.Background()
	snaps := db.SnapshotStore()
	if err := snaps.Save(ctx, store.Snapshot{ExecutionID: "run-1", Sequence: 9, SchemaVersion: event.SchemaVersion, State: []byte(`{}`)}); err != nil {
		panic(err)
	}
	s, ok, err := snaps.LoadAt(ctx, "run-1", 20)
	fmt.Println(s.Sequence, ok, err)
	// Output:
	// 9 true <nil>
}

func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		fmt.Println("cleanup:", err)
	}
}
