package sqlite

import "github.com/loom-kernel/loom/store"

// StoreSet hands the stores over as one store.Set, so the preset plugs into
// loom.Config whole: loom.Config{Storage: st, Flows: …}.
func (s Stores) StoreSet() store.Set {
	return store.Set{Events: s.Events, Snapshots: s.Snapshots, Branches: s.Branches,
		Timers: s.Timers, Leases: s.Leases, Content: s.Content, Queues: s.Queues, Archive: s.Archive,
		ReadModels: s.ReadModels}
}
