package memstore

import "github.com/loom-kernel/loom/store"

// NewSet returns fresh in-memory stores of every kind a runtime uses, as
// one store.Set for loom.Config's Storage field: the whole runtime in
// memory, for tests and examples. Nothing survives the process.
func NewSet() store.Set {
	return store.Set{Events: NewEventStore(), Snapshots: NewSnapshotStore(), Branches: NewBranchRegistry(),
		Timers: NewTimerStore(), Leases: NewLeaseStore(), Content: NewContentStore(), Queues: NewQueueStore(),
		Archive: NewArchiveStore(), ReadModels: NewReadModelStore()}
}
