package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loom-kernel/loom/store"
	msqlite "modernc.org/sqlite"
)

// ErrInvalidOption is returned by Open for an option value it cannot honour
// (an unknown Synchronous level, an empty path). Nothing is opened.
var ErrInvalidOption = errors.New("sqlite: invalid option")

// DB owns one SQLite database file in WAL mode: a single writer connection,
// used by one group-committing caller at a time, and a pool of read-only
// connections. The stores it hands out (EventStore, SnapshotStore,
// BranchRegistry, TimerStore, LeaseStore, ContentStore, QueueStore,
// ArchiveStore, ReadModelStore) are views that share it.
//
// Ownership: the DB owns the file and every connection. Closing a view only
// detaches that view (its later calls return store.ErrClosed); DB.Close
// closes the connections and every view at once. A DB is safe for
// concurrent use.
type DB struct {
	path  string
	opts  options
	write *sql.DB // at most one connection: the writer's
	read  *sql.DB // query_only connections
	reads *readStmts
	w     *writer            // the write connection and its group commit
	wake  *store.Broadcaster // wakes subscribers after commits
	// changes wakes them after commits of other connections, while any
	// subscription is open.
	changes *changePoller

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database file at path, switches it to
// WAL mode, sets the writer's synchronous level, applies the pending schema
// migrations and prepares the read statements. It starts no goroutine of
// its own until a subscription opens (see EventStore.Subscribe). It fails
// with *SchemaVersionError when
// the file was written by a newer schema than this code knows, and with
// ErrInvalidOption for a bad option; on any failure nothing stays open.
func Open(path string, opts ...Option) (*DB, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidOption)
	}
	if !o.synchronous.valid() {
		return nil, fmt.Errorf("%w: synchronous %v", ErrInvalidOption, o.synchronous)
	}
	if o.migrations == nil {
		o.migrations = schemaMigrations
	}
	db := &DB{path: path, opts: o, wake: &store.Broadcaster{}}
	var err error
	if db.write, err = openPool(writerDSN(path, o)); err != nil {
		return nil, err
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	wc, err := db.write.Conn(context.Background())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite: open %s: %w", path, err), db.write.Close())
	}
	if err := migrate(context.Background(), wc, o.migrations); err != nil {
		return nil, errors.Join(err, wc.Close(), db.write.Close())
	}
	if db.read, err = openPool(readerDSN(path, o)); err != nil {
		return nil, errors.Join(err, wc.Close(), db.write.Close())
	}
	db.read.SetMaxOpenConns(o.readConns)
	db.read.SetMaxIdleConns(o.readConns)
	if db.reads, err = prepareReads(context.Background(), db.read); err != nil {
		return nil, errors.Join(err, db.read.Close(), wc.Close(), db.write.Close())
	}
	db.w = newWriter(wc, db.wake)
	db.changes = newChangePoller(readerDSN(path, o), ChangePollInterval, db.wake)
	return db, nil
}

// openPool opens a database/sql pool over the modernc driver without
// registering anything process-wide.
func openPool(dsn string) (*sql.DB, error) {
	c, err := msqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return sql.OpenDB(c), nil
}

// fileURI turns a path into an SQLite URI, escaping the characters a URI
// gives a meaning to.
func fileURI(path string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(path)
}

func writerDSN(path string, o options) string {
	q := []string{
		"_pragma=busy_timeout(" + strconv.FormatInt(o.busyTimeout.Milliseconds(), 10) + ")",
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(" + o.synchronous.String() + ")",
		// No foreign keys: the writer keeps events and executions consistent
		// inside one transaction, and a per-row FK check would cost appends.
		"_pragma=foreign_keys(0)",
		"_pragma=temp_store(MEMORY)",
	}
	return fileURI(path) + "?" + strings.Join(q, "&")
}

func readerDSN(path string, o options) string {
	q := []string{
		"_pragma=busy_timeout(" + strconv.FormatInt(o.busyTimeout.Milliseconds(), 10) + ")",
		"_pragma=query_only(1)",
	}
	return fileURI(path) + "?" + strings.Join(q, "&")
}

// Path returns the file the DB was opened on.
func (db *DB) Path() string { return db.path }

// EventStore returns a view of the event log. Closing it does not close db.
func (db *DB) EventStore() *EventStore { return &EventStore{view: view{db: db}} }

// SnapshotStore returns a view of the snapshots. Closing it does not close db.
func (db *DB) SnapshotStore() *SnapshotStore { return &SnapshotStore{view: view{db: db}} }

// BranchRegistry returns a view of the refs. Closing it does not close db.
func (db *DB) BranchRegistry() *BranchRegistry { return &BranchRegistry{view: view{db: db}} }

// TimerStore returns a view of the durable timers. Closing it does not close db.
func (db *DB) TimerStore() *TimerStore { return &TimerStore{view: view{db: db}} }

// LeaseStore returns a view of the leases. Closing it does not close db.
func (db *DB) LeaseStore() *LeaseStore { return &LeaseStore{view: view{db: db}} }

// ArchiveStore returns a view of the archive of compacted events. Closing
// it does not close db.
func (db *DB) ArchiveStore() *ArchiveStore { return &ArchiveStore{view: view{db: db}} }

// ReadModelStore returns a view of the read models and their projections'
// watermarks. Closing it does not close db.
func (db *DB) ReadModelStore() *ReadModelStore { return &ReadModelStore{view: view{db: db}} }

// WriteStats counts the appends committed since Open.
type WriteStats struct {
	// Transactions is the number of committed transactions that wrote
	// appended events (snapshot, ref, timer, lease, fence, fork and delete
	// writes are not counted).
	Transactions int64
	// Batches is the number of Append calls they acknowledged as written.
	Batches int64
	// Events is the number of events those batches held.
	Events int64
}

// WriteStats returns the writer's counters. Batches/Transactions above one
// means group commit is folding concurrent appends into shared commits.
func (db *DB) WriteStats() WriteStats { return db.w.stats() }

// Close waits for the writes already queued to commit, then closes every
// connection and detaches every view; later calls on the DB or any of its
// views return store.ErrClosed, and subscriptions end with it. The poller
// of other connections' commits has exited when Close returns. A second
// Close returns the first one's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.closed.Store(true)
		db.changes.close()
		werr := db.w.close()
		db.wake.NotifyAll()
		db.closeErr = errors.Join(werr, db.reads.close(), db.read.Close(), db.write.Close())
	})
	return db.closeErr
}

// readErr maps a read failure caused by a concurrent Close to ErrClosed.
func (db *DB) readErr(op string, err error) error {
	if db.closed.Load() || errors.Is(err, sql.ErrConnDone) {
		return store.ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// readStmts are the statements the read pool runs, prepared once at Open
// (database/sql re-prepares them lazily on each pooled connection).
type readStmts struct {
	eventsFrom     *sql.Stmt
	eventsRange    *sql.Stmt
	executions     *sql.Stmt
	unfinished     *sql.Stmt
	snapshotLatest *sql.Stmt
	snapshotAt     *sql.Stmt
	snapshotSeqs   *sql.Stmt
	ref            *sql.Stmt
	refsFrom       *sql.Stmt
	timer          *sql.Stmt
	timersDue      *sql.Stmt
	lease          *sql.Stmt
	trimPoint      *sql.Stmt
	archiveRange   *sql.Stmt
	rmGet          *sql.Stmt
	rmQueryAll     *sql.Stmt
	rmWatermark    *sql.Stmt
	rmWatermarks   *sql.Stmt

	// rmWhere holds the statements of read-model queries with a Where, by
	// the number of its pairs, prepared on first use (whereStmt).
	rmMu    sync.Mutex
	rmWhere map[int]*sql.Stmt

	// catalog holds the statements of catalog searches and counts, by
	// their text, prepared on first use (catalogStmt).
	catMu   sync.Mutex
	catalog map[string]*sql.Stmt
}

const eventCols = `sequence, id, workflow_id, event_type, timestamp, payload, metadata`

// sqlListExecutions pages through executions by id. Each row's length is
// one seek on the events key; its workflow id is the first non-empty one of
// the log, found in the log only when the first batch had none.
const sqlListExecutions = `SELECT x.execution_id,
	COALESCE(NULLIF(x.workflow_id, ''), (SELECT e.workflow_id FROM events e
		WHERE e.execution_id = x.execution_id AND e.workflow_id <> '' ORDER BY e.sequence LIMIT 1), ''),
	COALESCE((SELECT MAX(e.sequence) + 1 FROM events e WHERE e.execution_id = x.execution_id), 0)
	FROM executions x WHERE x.execution_id > ? ORDER BY x.execution_id LIMIT ?`

func prepareReads(ctx context.Context, db *sql.DB) (*readStmts, error) {
	r := &readStmts{}
	list := []struct {
		dst **sql.Stmt
		q   string
	}{
		{&r.eventsFrom, `SELECT ` + eventCols + ` FROM events WHERE execution_id = ? AND sequence >= ? ORDER BY sequence`},
		{&r.eventsRange, `SELECT ` + eventCols + ` FROM events WHERE execution_id = ? AND sequence >= ? AND sequence < ? ORDER BY sequence`},
		{&r.executions, sqlListExecutions},
		{&r.unfinished, sqlListUnfinished},
		{&r.snapshotLatest, `SELECT sequence, schema_version, state FROM snapshots WHERE execution_id = ? ORDER BY sequence DESC LIMIT 1`},
		{&r.snapshotAt, `SELECT sequence, schema_version, state FROM snapshots WHERE execution_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`},
		{&r.snapshotSeqs, `SELECT sequence FROM snapshots WHERE execution_id = ? ORDER BY sequence`},
		{&r.ref, `SELECT execution_id, version FROM refs WHERE name = ?`},
		{&r.refsFrom, `SELECT name, execution_id, version FROM refs WHERE name >= ? ORDER BY name`},
		{&r.timer, `SELECT ` + timerCols + ` FROM timers WHERE key = ?`},
		{&r.timersDue, `SELECT ` + timerCols + ` FROM timers WHERE wake_at <= ? ORDER BY wake_at, key LIMIT ?`},
		{&r.lease, sqlGetLease},
		{&r.trimPoint, sqlTrimPoint},
		{&r.archiveRange, sqlArchiveRange},
		{&r.rmGet, sqlRMGet},
		{&r.rmQueryAll, sqlRMQueryAll},
		{&r.rmWatermark, sqlRMWatermark},
		{&r.rmWatermarks, sqlRMWatermarks},
	}
	for _, s := range list {
		st, err := db.PrepareContext(ctx, s.q)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("sqlite: prepare %q: %w", s.q, err), r.close())
		}
		*s.dst = st
	}
	return r, nil
}

// close closes every prepared statement.
func (r *readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{r.eventsFrom, r.eventsRange, r.executions, r.unfinished, r.snapshotLatest,
		r.snapshotAt, r.snapshotSeqs, r.ref, r.refsFrom, r.timer, r.timersDue, r.lease, r.trimPoint, r.archiveRange,
		r.rmGet, r.rmQueryAll, r.rmWatermark, r.rmWatermarks} {
		if st != nil {
			if err := st.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	r.rmMu.Lock()
	defer r.rmMu.Unlock()
	for k, st := range r.rmWhere { //loom:order-independent closing each
		if err := st.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(r.rmWhere, k)
	}
	r.catMu.Lock()
	defer r.catMu.Unlock()
	for k, st := range r.catalog { //loom:order-independent closing each
		if err := st.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(r.catalog, k)
	}
	return errors.Join(errs...)
}
