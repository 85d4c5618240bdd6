package store

// Set is the storage a runtime needs, as one value: the event log and the
// optional stores beside it. A storage preset (plugins/sqlite.Storage,
// plugins/postgres.Storage, memstore.NewSet) returns one, and loom.Config
// takes it whole in its Storage field. A nil field is a store the preset
// does not provide.
type Set struct {
	Events    EventStore
	Snapshots SnapshotStore
	Branches  BranchRegistry
	Timers    TimerStore
	Leases    LeaseStore
	Content   ContentStore
	// Queues is the durable start queue dispatch.Queue claims from.
	Queues QueueStore
	// Archive keeps the events compaction moves out of the logs.
	Archive ArchiveStore
	// ReadModels keeps the rows projections fold the logs into, and their
	// watermarks.
	ReadModels ReadModelStore
}

// Provider hands over a Set: a preset's result plugs into loom.Config
// whole (Config{Storage: st}).
type Provider interface {
	StoreSet() Set
}

// StoreSet returns s itself, so a Set is its own Provider.
func (s Set) StoreSet() Set { return s }
