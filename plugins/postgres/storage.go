package postgres

import (
	"context"
	"sync/atomic"

	"github.com/loom-kernel/loom/store"
)

// Stores is the storage a runtime needs, over one schema of a PostgreSQL
// database: the event log, the snapshots, the branch refs, the durable
// timers, the heartbeat leases, the claim-check content store, the start
// queues, the archive of compacted events and the read models, all sharing
// one DB.
//
// Ownership: Stores owns the DB. Close closes it, and with it the nine
// stores; closing one of the nine only detaches that one. A pool passed in
// Options.Pool is borrowed and stays open after Close. Close may be called
// more than once and returns the first call's result.
type Stores struct {
	Events    store.EventStore
	Snapshots store.SnapshotStore
	Branches  store.BranchRegistry
	Timers    store.TimerStore
	// Leases grants the heartbeat leases that keep one live driver per
	// execution across every node on the schema (loom.Config.Leases).
	Leases store.LeaseStore
	// Content keeps claim-checked effect results (ADR 0054); it is also a
	// store.ContentDeleter.
	Content store.ContentStore
	// Queues is the durable start queue (QueueStore), whose claims hold
	// their limits across every node on the schema.
	Queues store.QueueStore
	// Archive keeps the events loom.Runtime.Compact moves out of the logs;
	// Events is the store.PrefixTrimmer that removes them.
	Archive store.ArchiveStore
	// ReadModels keeps the rows projections fold the logs into, and their
	// watermarks, shared by every node on the schema.
	ReadModels store.ReadModelStore
	// Close waits for queued appends to commit, stops the LISTEN connection
	// and closes the pool the DB opened (never a borrowed one).
	Close func() error
	// DB is the shared database, for WriteStats or further views.
	DB *DB
}

// Storage is the preset that wires Loom to PostgreSQL: it opens opts (see
// Open for the guarantees and failure modes) and returns its event store,
// snapshot store, branch registry, timer store, lease store, content
// store, queue store, archive and read-model store in a Stores value. Point every node at the same DSN and schema to
// share the executions between them.
func Storage(ctx context.Context, opts Options) (Stores, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return Stores{}, err
	}
	return Stores{
		Events:     db.EventStore(),
		Snapshots:  db.SnapshotStore(),
		Branches:   db.BranchRegistry(),
		Timers:     db.TimerStore(),
		Leases:     db.LeaseStore(),
		Content:    db.ContentStore(),
		Queues:     db.QueueStore(),
		Archive:    db.ArchiveStore(),
		ReadModels: db.ReadModelStore(),
		Close:      db.Close,
		DB:         db,
	}, nil
}

// view is what the nine stores share: the DB they work on and whether
// closing them closes it.
//
// A borrowed view (from DB.EventStore and its siblings) only detaches on
// Close: the DB and its other views stay open, and the DB is closed once, by
// its owner, with DB.Close. An owning view (from OpenEventStore and its
// siblings) is the only user of a DB it opened, so its Close is DB.Close.
type view struct {
	db     *DB
	owned  bool
	closed atomic.Bool
}

// check returns store.ErrClosed once the view or its DB is closed.
func (v *view) check() error {
	if v.closed.Load() || v.db.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// close detaches the view, closing the DB when the view owns it, and wakes
// every subscriber so those of this view see store.ErrClosed and end.
func (v *view) close() error {
	if v.owned {
		v.closed.Store(true)
		return v.db.Close()
	}
	if v.closed.CompareAndSwap(false, true) {
		v.db.wake.NotifyAll()
	}
	return nil
}

// readErr maps a failure to store.ErrClosed once the view is closed.
func (v *view) readErr(op string, err error) error {
	if v.closed.Load() {
		return store.ErrClosed
	}
	return v.db.readErr(op, err)
}

// Schema returns the schema the store works in.
func (v *view) Schema() string { return v.db.schema }

// DB returns the database the store works on. For a store from
// OpenEventStore (or a sibling) the store owns it: close the store, not the DB.
func (v *view) DB() *DB { return v.db }

// OpenEventStore opens opts (see Open) and returns an EventStore that owns
// the DB: closing the store closes it. Use Open and DB.EventStore, or
// Storage, to share one DB between stores.
func OpenEventStore(ctx context.Context, opts Options) (*EventStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &EventStore{view: view{db: db, owned: true}}, nil
}

// OpenSnapshotStore is OpenEventStore for a SnapshotStore that owns its DB.
func OpenSnapshotStore(ctx context.Context, opts Options) (*SnapshotStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &SnapshotStore{view: view{db: db, owned: true}}, nil
}

// OpenBranchRegistry is OpenEventStore for a BranchRegistry that owns its DB.
func OpenBranchRegistry(ctx context.Context, opts Options) (*BranchRegistry, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &BranchRegistry{view: view{db: db, owned: true}}, nil
}

// OpenTimerStore is OpenEventStore for a TimerStore that owns its DB.
func OpenTimerStore(ctx context.Context, opts Options) (*TimerStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &TimerStore{view: view{db: db, owned: true}}, nil
}

// OpenContentStore is OpenEventStore for a ContentStore that owns its DB.
func OpenContentStore(ctx context.Context, opts Options) (*ContentStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ContentStore{view: view{db: db, owned: true}}, nil
}

// OpenArchiveStore is OpenEventStore for an ArchiveStore that owns its DB.
func OpenArchiveStore(ctx context.Context, opts Options) (*ArchiveStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ArchiveStore{view: view{db: db, owned: true}}, nil
}

// OpenLeaseStore is OpenEventStore for a LeaseStore that owns its DB.
func OpenLeaseStore(ctx context.Context, opts Options) (*LeaseStore, error) {
	db, err := Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &LeaseStore{view: view{db: db, owned: true}}, nil
}
