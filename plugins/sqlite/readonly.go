package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-kernel/loom/store"
)

// ErrReadOnly is what every write of a read-only store returns: nothing was
// written.
var ErrReadOnly = errors.New("sqlite: the store was opened read-only")

// ErrNotAStore matches *NotAStoreError.
var ErrNotAStore = errors.New("sqlite: not a Loom store")

// NotAStoreError is OpenReadOnly's refusal of a path that is not a Loom
// SQLite store it can read: a directory, a named pipe or another special
// file (refused from its mode alone, so opening it never blocks), a file
// that is not SQLite, or a SQLite file without Loom's tables. Nothing was
// opened.
type NotAStoreError struct {
	Path   string
	Reason string
}

func (e *NotAStoreError) Error() string { return "sqlite: " + e.Path + " " + e.Reason }

// Is makes errors.Is(err, ErrNotAStore) true.
func (e *NotAStoreError) Is(target error) bool { return target == ErrNotAStore }

// ReadMode says how a ReadOnlyDB reads its file; it follows the files on
// disk, and may change while the DB is open (a writer starting or stopping).
type ReadMode string

// The read modes. None of them writes to the database file or its -wal,
// -shm and -journal files, or creates any of them.
const (
	// ReadFile: no write-ahead log holds anything, so the database file
	// holds every commit; it is opened immutable (no locks, no -wal or
	// -shm created).
	ReadFile ReadMode = "file"
	// ReadWAL: a write-ahead log holds commits — a running writer's, or
	// those a killed writer left. The -wal is read through a read-only
	// -shm: with a live writer its index is used as is; without one
	// (a crash) SQLite rebuilds the index in private memory from the -wal
	// itself, verifying each frame, so every committed transaction is read
	// and nothing is checkpointed into the database file.
	ReadWAL ReadMode = "wal"
	// ReadSnapshot: the files need a write to be read — a hot rollback
	// journal a killed writer left (its database file holds pages of a
	// transaction that never committed), or a -wal without its -shm. They
	// are copied into a private temporary directory, where SQLite repairs
	// the copy; the store's own files are untouched. Reads see the store as
	// of the copy (a new copy is made when the files change).
	ReadSnapshot ReadMode = "snapshot"
)

// ReadOnlyDB is a Loom SQLite store opened for reading only (OpenReadOnly):
// it never migrates, never checkpoints, and never writes or creates a file
// beside the database (no -wal, -shm or -journal). Its stores are views:
// EventStore (with range reads, subscriptions, trim points and the
// execution catalog), SnapshotStore (with listing), BranchRegistry and
// ArchiveStore; their writes return ErrReadOnly.
//
// It follows the files: before a read (at most once per
// ChangePollInterval) and while a subscription is open it checks them, and
// when a writer starts, stops or is killed it reopens in the fitting
// ReadMode, so a long-lived reader keeps seeing every commit. A ReadOnlyDB
// is safe for concurrent use.
type ReadOnlyDB struct {
	path string
	opts options
	wake *store.Broadcaster

	mu     sync.RWMutex // readers share it for one query; a reopen takes it alone
	cur    *readConn
	closed atomic.Bool

	checked   atomic.Int64 // unix nanoseconds of the last look at the files
	refreshMu sync.Mutex   // one look (and reopen) at a time

	followMu  sync.Mutex
	followers int
	stop      chan struct{}
	polls     sync.WaitGroup
}

// readConn is one opening of the files in one ReadMode.
type readConn struct {
	pool  *sql.DB
	mode  ReadMode
	files fileState
	// tables holds the file's tables, and "table.column" for the columns
	// later migrations added to a table (addedColumns) that it has.
	tables  map[string]bool
	version int
	tmp     string // the private copy's directory (ReadSnapshot), else ""
}

// SchemaInfo is the schema version of a ReadOnlyDB's file and the newest
// this code knows.
type SchemaInfo struct {
	// Found is the version the file's schema_migrations records.
	Found int
	// Known is the newest version this code knows. Found > Known is a file
	// of a newer release, read because every table and column this code
	// reads is there; Found < Known is an older file, read as it is
	// (without tables it predates: no snapshots, no refs).
	Known int
}

// OpenReadOnly opens the Loom store at path for reading only. The file must
// exist, be a regular file (a named pipe, a directory or a device is
// refused at once, before anything opens it), be SQLite and hold Loom's
// tables (*NotAStoreError otherwise; a missing file matches
// fs.ErrNotExist). A schema older than this code's is read as it is,
// never migrated; a newer one is read when every table and column read
// here is still there, and refused with an error matching ErrSchemaTooNew
// (*SchemaVersionError) when it is not. Of opts only WithBusyTimeout and
// WithReadConns apply.
func OpenReadOnly(path string, opts ...Option) (*ReadOnlyDB, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" {
		return nil, fmt.Errorf("%w: empty path", ErrInvalidOption)
	}
	db := &ReadOnlyDB{path: path, opts: o, wake: &store.Broadcaster{}}
	files, err := statFiles(path)
	if err != nil {
		return nil, err
	}
	c, err := db.open(files)
	if err != nil {
		return nil, err
	}
	db.cur = c
	db.checked.Store(time.Now().UnixNano())
	return db, nil
}

// Path returns the database file.
func (db *ReadOnlyDB) Path() string { return db.path }

// Mode returns how the files are read now.
func (db *ReadOnlyDB) Mode() ReadMode {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.cur.mode
}

// Schema returns the file's schema version and the newest this code knows.
func (db *ReadOnlyDB) Schema() SchemaInfo {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return SchemaInfo{Found: db.cur.version, Known: len(schemaMigrations)}
}

// EventStore returns a view of the event log.
func (db *ReadOnlyDB) EventStore() *ReadOnlyEventStore { return &ReadOnlyEventStore{roView{db: db}} }

// SnapshotStore returns a view of the snapshots.
func (db *ReadOnlyDB) SnapshotStore() *ReadOnlySnapshotStore {
	return &ReadOnlySnapshotStore{roView{db: db}}
}

// BranchRegistry returns a view of the branch refs.
func (db *ReadOnlyDB) BranchRegistry() *ReadOnlyBranchRegistry {
	return &ReadOnlyBranchRegistry{roView{db: db}}
}

// ArchiveStore returns a view of the archive of compacted events.
func (db *ReadOnlyDB) ArchiveStore() *ReadOnlyArchiveStore {
	return &ReadOnlyArchiveStore{roView{db: db}}
}

// Close stops following the files, ends every subscription (with
// store.ErrClosed), closes the connections and removes a private copy.
// Later calls return store.ErrClosed. A second Close returns nil.
func (db *ReadOnlyDB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return nil
	}
	db.followMu.Lock()
	if db.stop != nil {
		close(db.stop)
		db.stop = nil
	}
	db.followMu.Unlock()
	db.polls.Wait()
	db.wake.NotifyAll()
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.cur.close()
}

func (c *readConn) close() error {
	var err error
	if c.pool != nil {
		err = c.pool.Close()
	}
	if c.tmp != "" {
		err = errors.Join(err, os.RemoveAll(c.tmp))
	}
	return err
}

// The tables read, and the statements read from them: every one must
// prepare, or the schema is not one this code can read.
var (
	roRequired = []string{"schema_migrations", "events", "executions"}
	roReads    = []struct {
		table string
		stmts []string
	}{
		{"events", []string{sqlEventsFrom, sqlEventsRange}},
		{"executions", []string{sqlListExecutions}},
		{"snapshots", []string{sqlSnapshotLatest, sqlSnapshotAt, sqlSnapshotSeqs}},
		{"refs", []string{sqlRef, sqlRefsFrom}},
		{"executions.trimmed", []string{sqlTrimPoint}},
		{"archive", []string{sqlArchiveRange}},
		{"catalog", []string{sqlCatalogFirstPage, sqlCatalogCount}},
	}
	// addedColumns are the columns a migration added to a table after
	// its creation, which an older file lacks.
	addedColumns = []struct{ table, column string }{{"executions", "trimmed"}}
)

const (
	sqlEventsFrom     = `SELECT ` + eventCols + ` FROM events WHERE execution_id = ? AND sequence >= ? ORDER BY sequence`
	sqlEventsRange    = `SELECT ` + eventCols + ` FROM events WHERE execution_id = ? AND sequence >= ? AND sequence < ? ORDER BY sequence`
	sqlSnapshotLatest = `SELECT sequence, schema_version, state FROM snapshots WHERE execution_id = ? ORDER BY sequence DESC LIMIT 1`
	sqlSnapshotAt     = `SELECT sequence, schema_version, state FROM snapshots WHERE execution_id = ? AND sequence <= ? ORDER BY sequence DESC LIMIT 1`
	sqlSnapshotSeqs   = `SELECT sequence FROM snapshots WHERE execution_id = ? ORDER BY sequence`
	sqlRef            = `SELECT name, execution_id, version FROM refs WHERE name = ?`
	sqlRefsFrom       = `SELECT name, execution_id, version FROM refs WHERE name >= ? AND instr(name, ?) = 1 ORDER BY name`
)

// checkSchema records which tables the file has and its schema version,
// and refuses a file this code cannot read.
func (db *ReadOnlyDB) checkSchema(c *readConn) error {
	ctx := context.Background()
	rows, err := c.pool.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return &NotAStoreError{Path: db.path, Reason: "is not a SQLite file Loom can read (" + err.Error() + ")"}
	}
	c.tables = map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return errors.Join(err, rows.Close())
		}
		c.tables[name] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return &NotAStoreError{Path: db.path, Reason: "is not a SQLite file Loom can read (" + err.Error() + ")"}
	}
	for _, t := range roRequired {
		if !c.tables[t] {
			return &NotAStoreError{Path: db.path, Reason: "is a SQLite file without a Loom store in it (no " + t + " table)"}
		}
	}
	for _, a := range addedColumns {
		var n int
		err := c.pool.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, a.table, a.column).Scan(&n)
		if err != nil {
			return &NotAStoreError{Path: db.path, Reason: "has an unreadable " + a.table + " table (" + err.Error() + ")"}
		}
		c.tables[a.table+"."+a.column] = n > 0
	}
	if err := c.pool.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&c.version); err != nil {
		return &NotAStoreError{Path: db.path, Reason: "has an unreadable schema_migrations table (" + err.Error() + ")"}
	}
	for _, r := range roReads {
		if !c.tables[r.table] {
			continue
		}
		for _, q := range r.stmts {
			st, err := c.pool.PrepareContext(ctx, q)
			if err == nil {
				err = st.Close()
			}
			if err == nil {
				continue
			}
			if c.version > len(schemaMigrations) {
				return fmt.Errorf("%w: its %s table is not one this code can read (%v)",
					&SchemaVersionError{Found: c.version, Known: len(schemaMigrations)}, r.table, err)
			}
			return &NotAStoreError{Path: db.path, Reason: "has a " + r.table + " table this code cannot read (" + err.Error() + ")"}
		}
	}
	return nil
}

// conn returns the connection to read with, reopened first when the files
// changed in a way it cannot serve, and the function that releases it.
func (db *ReadOnlyDB) conn() (*readConn, func(), error) {
	if db.closed.Load() {
		return nil, nil, store.ErrClosed
	}
	if now := time.Now().UnixNano(); now-db.checked.Load() >= int64(ChangePollInterval) {
		db.checked.Store(now)
		// A failed reopen keeps the open connection; the next look retries.
		// A change this look saw is one the poller will not see again:
		// wake the followers for it here.
		if moved, _ := db.refresh(); moved {
			db.wake.NotifyAll()
		}
	}
	db.mu.RLock()
	if db.closed.Load() {
		db.mu.RUnlock()
		return nil, nil, store.ErrClosed
	}
	return db.cur, db.mu.RUnlock, nil
}

// refresh looks at the files and reopens when the connection cannot serve
// them. It reports whether anything on disk changed since the last look.
func (db *ReadOnlyDB) refresh() (moved bool, err error) {
	db.refreshMu.Lock()
	defer db.refreshMu.Unlock()
	files, err := statFiles(db.path)
	if err != nil {
		return true, err
	}
	db.mu.RLock()
	old := db.cur.files
	db.mu.RUnlock()
	if !needsReopen(old, files) {
		if changed(old, files) {
			db.mu.Lock()
			db.cur.files = files
			db.mu.Unlock()
			return true, nil
		}
		return false, nil
	}
	c, err := db.open(files)
	if err != nil {
		return true, err
	}
	db.mu.Lock()
	if db.closed.Load() {
		db.mu.Unlock()
		return true, errors.Join(store.ErrClosed, c.close())
	}
	prev := db.cur
	db.cur = c
	db.mu.Unlock()
	return true, prev.close()
}

// readErr maps a read failure caused by Close to ErrClosed.
func (db *ReadOnlyDB) readErr(op string, err error) error {
	if db.closed.Load() || errors.Is(err, sql.ErrConnDone) {
		return store.ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// follow registers a subscription, starting the files' poller for the
// first one, and returns the function that unregisters it.
func (db *ReadOnlyDB) follow() (func(), error) {
	db.followMu.Lock()
	defer db.followMu.Unlock()
	if db.closed.Load() {
		return nil, store.ErrClosed
	}
	db.followers++
	if db.followers == 1 {
		db.stop = make(chan struct{})
		db.polls.Add(1)
		go db.poll(db.stop)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			db.followMu.Lock()
			defer db.followMu.Unlock()
			if db.followers--; db.followers == 0 && db.stop != nil {
				close(db.stop)
				db.stop = nil
			}
		})
	}, nil
}

// poll wakes every follower whenever the files change (an append by any
// process, a writer starting or stopping), every ChangePollInterval until
// stop is closed. In ReadWAL mode it also watches PRAGMA data_version on a
// connection of its own, which moves with every commit a writer makes
// even when the files' sizes and times happen not to.
func (db *ReadOnlyDB) poll(stop <-chan struct{}) {
	defer db.polls.Done()
	tick := time.NewTicker(ChangePollInterval)
	defer tick.Stop()
	var (
		watch   *sql.DB
		watched *readConn
		version int64 = -1
	)
	defer func() {
		if watch != nil {
			_ = watch.Close() // a read-only connection: nothing to lose
		}
	}()
	for {
		moved, err := db.refresh()
		db.mu.RLock()
		c := db.cur
		db.mu.RUnlock()
		if c != watched {
			if watch != nil {
				_ = watch.Close()
				watch = nil
			}
			watched, version = c, -1
			if c.mode == ReadWAL {
				watch, _ = openPool(db.dsn(db.path, ReadWAL))
				if watch != nil {
					watch.SetMaxOpenConns(1)
				}
			}
		}
		if watch != nil {
			var v int64
			if watch.QueryRow("PRAGMA data_version").Scan(&v) == nil && v != version {
				moved, version = true, v
			}
		}
		if moved || err != nil {
			db.wake.NotifyAll()
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}
