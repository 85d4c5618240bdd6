package memstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// TestEventStoreConformance runs the EventStore kit with the default
// payload cap.
func TestEventStoreConformance(t *testing.T) {
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore { return memstore.NewEventStore() },
	})
}

// TestEventStoreConformanceSmallCap runs the EventStore kit with a 4 KiB
// cap set through WithLimits, so the cap refusals exercise the option.
func TestEventStoreConformanceSmallCap(t *testing.T) {
	const limit = 4 << 10
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(*testing.T) store.EventStore {
			return memstore.NewEventStore(memstore.WithLimits(event.Limits{MaxPayloadBytes: limit}))
		},
		MaxPayloadBytes: limit,
	})
}

// TestSnapshotStoreConformance runs the SnapshotStore kit.
func TestSnapshotStoreConformance(t *testing.T) {
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(*testing.T) store.SnapshotStore { return memstore.NewSnapshotStore() },
	})
}

// TestBranchRegistryConformance runs the BranchRegistry kit.
func TestBranchRegistryConformance(t *testing.T) {
	storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{
		New: func(*testing.T) store.BranchRegistry { return memstore.NewBranchRegistry() },
	})
}

// TestListExecutionsWhileCreating pages through the listing while other
// goroutines create executions: every page stays ordered, every execution
// that existed before the walk began is listed, and a final walk sees all.
func TestListExecutionsWhileCreating(t *testing.T) {
	s := memstore.NewEventStore()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx := context.Background()
	create := func(id string) {
		ev := event.Envelope{ID: id + "#0", ExecutionID: id, Type: "T", Payload: json.RawMessage(`{}`)}
		if err := s.Append(ctx, id, 0, []event.Envelope{ev}); err != nil {
			t.Errorf("Append(%q): %v", id, err)
		}
	}
	for i := range 500 {
		create(fmt.Sprintf("before-%04d", i))
	}
	var wg sync.WaitGroup
	defer wg.Wait() // a failing walk still lets the creators finish before Close
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				create(fmt.Sprintf("during-%d-%04d", w, i))
			}
		}()
	}
	seen := map[string]bool{}
	last := ""
	for cursor := ""; ; {
		page, err := s.ListExecutions(ctx, cursor, 7)
		if err != nil {
			t.Fatalf("ListExecutions: %v", err)
		}
		for _, info := range page.Executions {
			if info.ExecutionID <= last {
				t.Fatalf("%q listed after %q", info.ExecutionID, last)
			}
			last = info.ExecutionID
			seen[last] = true
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	wg.Wait()
	for i := range 500 {
		if id := fmt.Sprintf("before-%04d", i); !seen[id] {
			t.Fatalf("%q existed before the walk but was not listed", id)
		}
	}
	page, err := s.ListExecutions(ctx, "", 2000)
	if err != nil || len(page.Executions) != 1500 || page.Next != "" {
		t.Fatalf("final listing: %d executions, next %q, %v; want 1500, \"\", nil", len(page.Executions), page.Next, err)
	}
}
