package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/store"
)

// DB is one schema of a PostgreSQL database: a connection pool (owned or
// borrowed), the group-commit writer of appends, and the LISTEN connection
// that wakes subscribers. The stores it hands out (EventStore,
// SnapshotStore, BranchRegistry, TimerStore, LeaseStore, ContentStore,
// QueueStore, ArchiveStore, ReadModelStore) are views that share it.
//
// Ownership: a DB opened on Options.DSN owns its pool and closes it; one
// opened on Options.Pool borrows it and never closes it. Closing a view only
// detaches that view; DB.Close stops the writer (after committing what is
// queued) and the listener, and detaches every view at once. A DB is safe
// for concurrent use, by any number of processes sharing the schema.
type DB struct {
	opts    Options
	pool    *pgxpool.Pool
	owned   bool   // the pool is ours to close
	schema  string // the schema's name, as given
	channel string // the NOTIFY channel of the schema's appends
	q       queries
	w       *writer
	wake    *store.Broadcaster
	listen  *listener

	closed    atomic.Bool
	closeOnce sync.Once
}

// Open connects to the database named by opts (a new pool on opts.DSN, or
// the borrowed opts.Pool), checks that the server keeps the durability
// contract (UTF8 encoding; synchronous_commit not off unless
// opts.AllowAsynchronousCommit), creates opts.Schema if missing and applies
// the pending schema migrations (safe when several processes do it at
// once). It starts no goroutine and opens no LISTEN connection: the first
// Subscribe does. It fails with ErrInvalidOption for bad options, with
// *SchemaVersionError when the schema was written by a newer release, and
// with the connection or SQL error otherwise; on any failure nothing stays
// open (a borrowed pool is left as it was).
func Open(ctx context.Context, opts Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db := &DB{opts: o, pool: o.Pool, schema: o.Schema, wake: &store.Broadcaster{}}
	if db.pool == nil {
		cfg, err := pgxpool.ParseConfig(o.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: DSN: %w", ErrInvalidOption, err)
		}
		if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
			cfg.ConnConfig.RuntimeParams["application_name"] = "loom"
		}
		if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return nil, fmt.Errorf("postgres: open pool: %w", err)
		}
		db.owned = true
	}
	if err := db.init(ctx); err != nil {
		if db.owned {
			db.pool.Close()
		}
		return nil, err
	}
	return db, nil
}

// init checks the server and migrates the schema, then builds the
// statements and the writer.
func (db *DB) init(ctx context.Context) error {
	if err := checkServer(ctx, db.pool, db.opts.AllowAsynchronousCommit); err != nil {
		return err
	}
	quoted := pgx.Identifier{db.schema}.Sanitize()
	if err := migrate(ctx, db.pool, db.schema, quoted, db.opts.migrations); err != nil {
		return err
	}
	db.channel = notifyChannel(db.schema)
	db.q = buildQueries(quoted)
	db.w = newWriter(db)
	db.listen = newListener(db)
	return nil
}

// checkServer refuses a server that would break the durability or
// byte-exactness contract: a database encoding other than UTF8 (text
// would be converted), or synchronous_commit off (a commit would return
// before it is durable) unless allowAsync.
func checkServer(ctx context.Context, pool *pgxpool.Pool, allowAsync bool) error {
	var encoding, syncCommit string
	err := pool.QueryRow(ctx, `SELECT current_setting('server_encoding'), current_setting('synchronous_commit')`).
		Scan(&encoding, &syncCommit)
	if err != nil {
		return fmt.Errorf("postgres: read server settings: %w", err)
	}
	if encoding != "UTF8" {
		return fmt.Errorf("%w: the database encoding is %s, not UTF8", ErrInvalidOption, encoding)
	}
	if syncCommit == "off" && !allowAsync {
		return fmt.Errorf("%w: synchronous_commit is off, so a commit is not durable when it returns "+
			"(set Options.AllowAsynchronousCommit to accept that)", ErrInvalidOption)
	}
	return nil
}

// Schema returns the schema the DB works in, as given (unquoted).
func (db *DB) Schema() string { return db.schema }

// Pool returns the pool the DB uses; for a DB opened on a DSN it is owned
// by the DB and closed by DB.Close.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// EventStore returns a view of the event log. Closing it does not close db.
func (db *DB) EventStore() *EventStore { return &EventStore{view: view{db: db}} }

// SnapshotStore returns a view of the snapshots. Closing it does not close db.
func (db *DB) SnapshotStore() *SnapshotStore { return &SnapshotStore{view: view{db: db}} }

// BranchRegistry returns a view of the refs. Closing it does not close db.
func (db *DB) BranchRegistry() *BranchRegistry { return &BranchRegistry{view: view{db: db}} }

// TimerStore returns a view of the durable timers. Closing it does not close db.
func (db *DB) TimerStore() *TimerStore { return &TimerStore{view: view{db: db}} }

// ContentStore returns a view of the content store. Closing it does not
// close db.
func (db *DB) ContentStore() *ContentStore { return &ContentStore{view: view{db: db}} }

// LeaseStore returns a view of the leases. Closing it does not close db.
func (db *DB) LeaseStore() *LeaseStore { return &LeaseStore{view: view{db: db}} }

// ArchiveStore returns a view of the archive of compacted events. Closing
// it does not close db.
func (db *DB) ArchiveStore() *ArchiveStore { return &ArchiveStore{view: view{db: db}} }

// ReadModelStore returns a view of the read models and their projections'
// watermarks. Closing it does not close db.
func (db *DB) ReadModelStore() *ReadModelStore { return &ReadModelStore{view: view{db: db}} }

// WriteStats counts the appends this DB committed since Open.
type WriteStats struct {
	// Transactions is the number of committed transactions that wrote
	// appended events (snapshot, ref, timer, fence, fork and delete writes
	// are not counted).
	Transactions int64
	// Batches is the number of Append calls they acknowledged as written.
	Batches int64
	// Events is the number of events those batches held.
	Events int64
}

// WriteStats returns the writer's counters. Batches/Transactions above one
// means group commit is folding concurrent appends into shared commits.
func (db *DB) WriteStats() WriteStats { return db.w.stats() }

// Close waits for the appends already queued to commit, stops the LISTEN
// connection and the re-read ticker, then closes the pool if the DB owns
// it (a borrowed pool stays open). Later calls on the DB or any of its
// views return store.ErrClosed, and subscriptions end with it. An append
// still queued is committed or fails on its own (its caller hears which);
// Close itself has nothing to report and returns nil, the second time too.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		db.w.close()
		db.listen.stop()
		db.wake.NotifyAll()
		if db.owned {
			db.pool.Close()
		}
	})
	return nil
}

// readErr maps a failure caused by a concurrent Close to store.ErrClosed and
// wraps the others with the operation.
func (db *DB) readErr(op string, err error) error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// beginner is what inTx needs: a pool, a pooled connection or a pgx.Conn.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// inTx runs fn in one transaction on b and commits it, or rolls it back when
// fn fails; a failed rollback is reported with the cause, never dropped.
func inTx(ctx context.Context, b beginner, fn func(tx pgx.Tx) error) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil {
			return errors.Join(err, fmt.Errorf("postgres: rollback: %w", rerr))
		}
		return err
	}
	return tx.Commit(ctx)
}
