package memstore_test

import (
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// TestQueueStoreConformance runs the QueueStore kit.
func TestQueueStoreConformance(t *testing.T) {
	storetest.RunQueueStore(t, func(*testing.T) store.QueueStore { return memstore.NewQueueStore() })
}

// TestTimerClaimsConformance runs the TimerClaimer kit on the timer store.
func TestTimerClaimsConformance(t *testing.T) {
	storetest.RunTimerClaims(t, storetest.TimerStoreFactory{
		New: func(*testing.T) store.TimerStore { return memstore.NewTimerStore() },
	})
}

// TestNewSetHasQueues: the in-memory preset provides a queue store.
func TestNewSetHasQueues(t *testing.T) {
	set := memstore.NewSet()
	if set.Queues == nil {
		t.Fatal("memstore.NewSet().Queues is nil")
	}
	if err := set.Queues.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
