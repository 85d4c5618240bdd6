package sqlite

import (
	"sync/atomic"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// StorageOptions configures the Storage preset. The zero value of every
// field but Path means the default of the matching Option.
type StorageOptions struct {
	// Path is the database file; it is created if missing. Required.
	Path string
	// Synchronous is the writer's synchronous level (default SyncFull).
	Synchronous Synchronous
	// Limits bounds envelopes on Append (default 16 MiB payloads).
	Limits event.Limits
	// BusyTimeout bounds waits for another process's lock (default 5 s).
	BusyTimeout time.Duration
	// ReadConns sizes the read pool (default 4).
	ReadConns int
}

// Stores is the storage a runtime needs, over one SQLite file: the event
// log, the snapshots, the branch refs, the durable timers, the heartbeat
// leases, the claim-check content store, the start queues, the archive
// of compacted events and the read models, all sharing one DB.
//
// Ownership: Stores owns the DB. Close closes it, and with it the nine
// stores; closing one of the nine only detaches that one. Close may be
// called more than once and returns the first call's result.
type Stores struct {
	Events    store.EventStore
	Snapshots store.SnapshotStore
	Branches  store.BranchRegistry
	Timers    store.TimerStore
	// Leases grants the heartbeat leases that keep one live driver per
	// execution across nodes sharing the file.
	Leases store.LeaseStore
	// Content keeps claim-checked effect results (ADR 0054); it is also a
	// store.ContentDeleter.
	Content store.ContentStore
	// Queues is the durable start queue; its Timers are also a
	// store.TimerClaimer.
	Queues store.QueueStore
	// Archive keeps the events loom.Runtime.Compact moves out of the logs;
	// Events is the store.PrefixTrimmer that removes them.
	Archive store.ArchiveStore
	// ReadModels keeps the rows projections fold the logs into, and their
	// watermarks.
	ReadModels store.ReadModelStore
	// Close waits for queued writes to commit and closes the database file.
	Close func() error
	// DB is the shared database, for WriteStats or further views.
	DB *DB
}

// Storage is the preset that wires Loom to one SQLite file: it opens
// opts.Path (see Open for the guarantees and failure modes) and returns its
// event store, snapshot store, branch registry, timer store, lease store,
// content store, queue store, archive and read-model store in a Stores
// value.
func Storage(opts StorageOptions) (Stores, error) {
	o := []Option{WithSynchronous(opts.Synchronous), WithLimits(opts.Limits)}
	if opts.BusyTimeout > 0 {
		o = append(o, WithBusyTimeout(opts.BusyTimeout))
	}
	if opts.ReadConns > 0 {
		o = append(o, WithReadConns(opts.ReadConns))
	}
	db, err := Open(opts.Path, o...)
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

// view is what EventStore, SnapshotStore, BranchRegistry, TimerStore,
// LeaseStore, ContentStore, QueueStore, ArchiveStore and ReadModelStore share: the DB they work on and whether closing them closes it.
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

// Path returns the database file the store works on.
func (v *view) Path() string { return v.db.path }

// DB returns the database the store works on. For a store from
// OpenEventStore (or a sibling) the store owns it: close the store, not the DB.
func (v *view) DB() *DB { return v.db }

// OpenEventStore opens the database file at path (see Open) and returns an
// EventStore that owns it: closing the store closes the database. Use
// Open and DB.EventStore instead to share one file between stores.
func OpenEventStore(path string, opts ...Option) (*EventStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &EventStore{view: view{db: db, owned: true}}, nil
}

// OpenSnapshotStore is OpenEventStore for a SnapshotStore that owns its
// database file.
func OpenSnapshotStore(path string, opts ...Option) (*SnapshotStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &SnapshotStore{view: view{db: db, owned: true}}, nil
}

// OpenBranchRegistry is OpenEventStore for a BranchRegistry that owns its
// database file.
func OpenBranchRegistry(path string, opts ...Option) (*BranchRegistry, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &BranchRegistry{view: view{db: db, owned: true}}, nil
}

// OpenTimerStore is OpenEventStore for a TimerStore that owns its database
// file.
func OpenTimerStore(path string, opts ...Option) (*TimerStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &TimerStore{view: view{db: db, owned: true}}, nil
}

// OpenLeaseStore is OpenEventStore for a LeaseStore that owns its database
// file.
func OpenLeaseStore(path string, opts ...Option) (*LeaseStore, error) {
	db, err := Open(path, opts...)
	if err != nil {
		return nil, err
	}
	return &LeaseStore{view: view{db: db, owned: true}}, nil
}
