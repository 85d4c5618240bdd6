package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-kernel/loom/event"
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
// EventStore (with range reads and subscriptions), SnapshotStore (with
// listing) and BranchRegistry; their writes return ErrReadOnly.
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
	pool    *sql.DB
	mode    ReadMode
	files   fileState
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

// fileState is what the files on disk look like: the database file and its
// three possible companions.
type fileState struct {
	db, wal, shm, journal os.FileInfo // nil when absent
	hotJournal            bool
}

// statFiles looks at the database file and its companions without opening
// any but a rollback journal's header (a regular file). Every file present
// must be a regular file.
func statFiles(path string) (fileState, error) {
	var st fileState
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, fmt.Errorf("sqlite: no store at %s: %w", path, fs.ErrNotExist)
	case err != nil:
		return st, fmt.Errorf("sqlite: %w", err)
	case !info.Mode().IsRegular():
		return st, &NotAStoreError{Path: path, Reason: "is " + fileKind(info.Mode()) + ", not a database file"}
	}
	st.db = info
	for _, side := range []struct {
		suffix string
		into   *os.FileInfo
	}{{"-wal", &st.wal}, {"-shm", &st.shm}, {"-journal", &st.journal}} {
		info, err := os.Stat(path + side.suffix)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return st, fmt.Errorf("sqlite: %w", err)
		case !info.Mode().IsRegular():
			return st, &NotAStoreError{Path: path, Reason: "has a " + side.suffix + " that is " + fileKind(info.Mode()) +
				", not a file SQLite wrote"}
		}
		*side.into = info
	}
	if st.journal != nil && st.journal.Size() >= int64(len(journalMagic)) {
		st.hotJournal, err = hasJournalHeader(path + "-journal")
		if err != nil {
			return st, fmt.Errorf("sqlite: %w", err)
		}
	}
	return st, nil
}

// journalMagic starts the header of a rollback journal that still has to
// be played back; a committed one is deleted, truncated or zeroed.
var journalMagic = []byte{0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7}

func hasJournalHeader(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close() // opened for reading: nothing to lose
	head := make([]byte, len(journalMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		return false, nil // shorter than a header: not a journal to play back
	}
	return bytes.Equal(head, journalMagic), nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// mode picks how files can be read without writing to them.
func (st fileState) mode() ReadMode {
	switch {
	case st.hotJournal:
		return ReadSnapshot
	case st.wal != nil && st.wal.Size() > 0 && st.shm != nil:
		return ReadWAL
	case st.wal != nil && st.wal.Size() > 0:
		return ReadSnapshot // a -wal whose index SQLite would have to create
	}
	return ReadFile
}

// sameFile reports whether a and b are the same file, unchanged.
func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// needsReopen reports whether a connection opened over old cannot serve
// the files as they are now: another mode, another database file, another
// -shm (a writer that stopped and started again), or, for an immutable
// file or a private copy, any change of it at all (an immutable connection
// trusts the pages it has read).
func needsReopen(old, now fileState) bool {
	mode := old.mode()
	switch {
	case mode != now.mode(), !os.SameFile(old.db, now.db):
		return true
	case mode == ReadFile:
		return !sameFile(old.db, now.db)
	case mode == ReadWAL:
		return !os.SameFile(old.shm, now.shm)
	case mode == ReadSnapshot:
		return !sameFile(old.db, now.db) || !sameFile(old.wal, now.wal) || !sameFile(old.journal, now.journal)
	}
	return false
}

// changed reports whether anything on disk moved between old and now.
func changed(old, now fileState) bool {
	return !sameFile(old.db, now.db) || !sameFile(old.wal, now.wal) || !sameFile(old.shm, now.shm) ||
		!sameFile(old.journal, now.journal)
}

// open opens files in their mode and checks the schema.
func (db *ReadOnlyDB) open(files fileState) (c *readConn, err error) {
	c = &readConn{mode: files.mode(), files: files}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.close())
		}
	}()
	path := db.path
	if c.mode == ReadSnapshot {
		if c.tmp, path, err = copyForReading(db.path, files); err != nil {
			return c, err
		}
	}
	if c.pool, err = openPool(db.dsn(path, c.mode)); err != nil {
		return c, err
	}
	c.pool.SetMaxOpenConns(db.opts.readConns)
	c.pool.SetMaxIdleConns(db.opts.readConns)
	if err := db.checkSchema(c); err != nil {
		return c, err
	}
	return c, nil
}

// dsn is the URI of path for mode: immutable for a file no log holds
// commits for, a read-only -shm for a write-ahead log, and the plain file
// for a private copy, which SQLite may repair.
func (db *ReadOnlyDB) dsn(path string, mode ReadMode) string {
	q := []string{"_pragma=busy_timeout(" + strconv.FormatInt(db.opts.busyTimeout.Milliseconds(), 10) + ")"}
	switch mode {
	case ReadFile:
		q = append(q, "mode=ro", "immutable=1")
	case ReadWAL:
		q = append(q, "mode=ro", "readonly_shm=1")
	}
	return fileURI(path) + "?" + strings.Join(append(q, "_pragma=query_only(1)"), "&")
}

// copyForReading copies the database file and the companion SQLite needs
// to play back (its hot journal, or its -wal) into a new temporary
// directory, and lets SQLite repair the copy there. It returns the
// directory and the copy's path.
func copyForReading(path string, files fileState) (dir, copied string, err error) {
	dir, err = os.MkdirTemp("", "loom-readonly-")
	if err != nil {
		return "", "", fmt.Errorf("sqlite: a private copy of %s: %w", path, err)
	}
	copied = filepath.Join(dir, "store.db")
	suffixes := []string{""}
	switch {
	case files.hotJournal:
		suffixes = append(suffixes, "-journal")
	case files.wal != nil:
		suffixes = append(suffixes, "-wal")
	}
	for _, s := range suffixes {
		if err := copyFile(path+s, copied+s); err != nil {
			return dir, "", fmt.Errorf("sqlite: a private copy of %s: %w", path+s, err)
		}
	}
	// One read-write connection plays the journal back (or recovers the
	// log) in the copy, and checkpoints it on close.
	repair, err := openPool(fileURI(copied) + "?_pragma=busy_timeout(5000)")
	if err != nil {
		return dir, "", err
	}
	_, qerr := repair.Exec(`SELECT count(*) FROM sqlite_master`)
	if err := errors.Join(qerr, repair.Close()); err != nil {
		return dir, "", &NotAStoreError{Path: path, Reason: "cannot be read: " + err.Error()}
	}
	return dir, copied, nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close() // opened for reading: nothing to lose
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
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
	}
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
		_, _ = db.refresh() // a failed reopen keeps the open connection; the next look retries
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

// roView is what the read-only stores share.
type roView struct {
	db     *ReadOnlyDB
	closed atomic.Bool
}

// Close detaches the view: its later calls return store.ErrClosed. The
// ReadOnlyDB stays open.
func (v *roView) Close() error {
	if v.closed.CompareAndSwap(false, true) {
		v.db.wake.NotifyAll()
	}
	return nil
}

// query runs q on the connection to read with and scans each row; from a
// file that predates table need it reads no rows.
func query[T any](ctx context.Context, v *roView, need, op, q string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	if v.closed.Load() {
		return nil, store.ErrClosed
	}
	c, release, err := v.db.conn()
	if err != nil {
		return nil, err
	}
	defer release()
	if need != "" && !c.tables[need] {
		return nil, nil
	}
	rows, err := c.pool.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, v.db.readErr(op, err)
	}
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, errors.Join(v.db.readErr(op, err), rows.Close())
		}
		out = append(out, x)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, v.db.readErr(op, err)
	}
	return out, nil
}

// ReadOnlyEventStore is the event log of a ReadOnlyDB: store.EventStore,
// store.RangeReader and store.Subscriber. Append returns ErrReadOnly.
type ReadOnlyEventStore struct{ roView }

var (
	_ store.EventStore  = (*ReadOnlyEventStore)(nil)
	_ store.RangeReader = (*ReadOnlyEventStore)(nil)
	_ store.Subscriber  = (*ReadOnlyEventStore)(nil)
)

// Append implements store.EventStore: it writes nothing and returns
// ErrReadOnly.
func (s *ReadOnlyEventStore) Append(context.Context, string, int64, []event.Envelope) error {
	return ErrReadOnly
}

// ReadFrom implements store.EventStore: the committed events of
// executionID with sequence >= from, in order, payloads and metadata as
// appended.
func (s *ReadOnlyEventStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	return query(ctx, &s.roView, "", "read events", sqlEventsFrom, scanEvent(executionID), executionID, from)
}

// ReadRange implements store.RangeReader: the events with
// from <= sequence < to, in order.
func (s *ReadOnlyEventStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	return query(ctx, &s.roView, "", "read events", sqlEventsRange, scanEvent(executionID), executionID, from, to)
}

// scanEvent reads a row of eventCols of executionID.
func scanEvent(executionID string) func(*sql.Rows) (event.Envelope, error) {
	return func(rows *sql.Rows) (event.Envelope, error) {
		e := event.Envelope{ExecutionID: executionID}
		var payload []byte
		var meta sql.NullString
		if err := rows.Scan(&e.Sequence, &e.ID, &e.WorkflowID, &e.Type, &e.Timestamp, &payload, &meta); err != nil {
			return e, err
		}
		e.Payload = json.RawMessage(payload)
		var err error
		if meta.Valid {
			e.Metadata, err = decodeMetadata(meta.String)
		}
		return e, err
	}
}

// ListExecutions implements store.EventStore, as EventStore.ListExecutions
// does.
func (s *ReadOnlyEventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if limit < 1 {
		limit = DefaultListPage
	}
	limit = min(limit, MaxListPage)
	infos, err := query(ctx, &s.roView, "", "list executions", sqlListExecutions, func(rows *sql.Rows) (store.ExecutionInfo, error) {
		var info store.ExecutionInfo
		return info, rows.Scan(&info.ExecutionID, &info.WorkflowID, &info.Length)
	}, after, limit+1)
	if err != nil {
		return store.ExecutionPage{}, err
	}
	page := store.ExecutionPage{Executions: infos}
	if len(infos) > limit {
		page.Executions = infos[:limit]
		page.Next = infos[limit-1].ExecutionID
	}
	return page, nil
}

// Subscribe implements store.Subscriber: the events of executionID from
// from on, those stored first, then each one another process commits,
// within about ChangePollInterval (the files are watched while any
// subscription of the DB is open). It ends when ctx ends or it is closed
// (Err nil), or when the view or its DB is closed (store.ErrClosed).
func (s *ReadOnlyEventStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	unfollow, err := s.db.follow()
	if err != nil {
		return nil, err
	}
	read := func(ctx context.Context, next int64) ([]event.Envelope, error) {
		return s.ReadFrom(ctx, executionID, next)
	}
	wait := func() <-chan struct{} { return s.db.wake.Wait(executionID) }
	sub := store.Follow(ctx, read, wait, max(from, 0))
	go func() {
		_ = sub.Err() // returns once the subscription has ended
		unfollow()
	}()
	return sub, nil
}

// ReadOnlySnapshotStore is the snapshots of a ReadOnlyDB:
// store.SnapshotStore and store.SnapshotLister. Save returns ErrReadOnly; a
// file that predates snapshots has none.
type ReadOnlySnapshotStore struct{ roView }

var (
	_ store.SnapshotStore  = (*ReadOnlySnapshotStore)(nil)
	_ store.SnapshotLister = (*ReadOnlySnapshotStore)(nil)
)

// Save implements store.SnapshotStore: it writes nothing and returns
// ErrReadOnly.
func (s *ReadOnlySnapshotStore) Save(context.Context, store.Snapshot) error { return ErrReadOnly }

// LoadLatest implements store.SnapshotStore.
func (s *ReadOnlySnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, sqlSnapshotLatest, executionID)
}

// LoadAt implements store.SnapshotStore.
func (s *ReadOnlySnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, sqlSnapshotAt, executionID, atMost)
}

func (s *ReadOnlySnapshotStore) load(ctx context.Context, executionID, q string, args ...any) (store.Snapshot, bool, error) {
	snaps, err := query(ctx, &s.roView, "snapshots", "load snapshot", q, func(rows *sql.Rows) (store.Snapshot, error) {
		snap := store.Snapshot{ExecutionID: executionID}
		err := rows.Scan(&snap.Sequence, &snap.SchemaVersion, &snap.State)
		if snap.State == nil {
			snap.State = []byte{}
		}
		return snap, err
	}, args...)
	if err != nil || len(snaps) == 0 {
		return store.Snapshot{}, false, err
	}
	return snaps[0], true, nil
}

// ListSequences implements store.SnapshotLister.
func (s *ReadOnlySnapshotStore) ListSequences(ctx context.Context, executionID string) ([]int64, error) {
	return query(ctx, &s.roView, "snapshots", "list snapshots", sqlSnapshotSeqs, func(rows *sql.Rows) (int64, error) {
		var seq int64
		return seq, rows.Scan(&seq)
	}, executionID)
}

// ReadOnlyBranchRegistry is the branch refs of a ReadOnlyDB
// (store.BranchRegistry). CreateRef and MoveRef return ErrReadOnly; a file
// that predates refs has none.
type ReadOnlyBranchRegistry struct{ roView }

var _ store.BranchRegistry = (*ReadOnlyBranchRegistry)(nil)

// CreateRef implements store.BranchRegistry: it returns ErrReadOnly.
func (r *ReadOnlyBranchRegistry) CreateRef(context.Context, string, string) (store.Ref, error) {
	return store.Ref{}, ErrReadOnly
}

// MoveRef implements store.BranchRegistry: it returns ErrReadOnly.
func (r *ReadOnlyBranchRegistry) MoveRef(context.Context, string, string, int64) (store.Ref, error) {
	return store.Ref{}, ErrReadOnly
}

// ReadRef implements store.BranchRegistry: the ref, or store.ErrRefNotFound.
func (r *ReadOnlyBranchRegistry) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	refs, err := query(ctx, &r.roView, "refs", "read ref", sqlRef, scanRef, name)
	if err != nil {
		return store.Ref{}, err
	}
	if len(refs) == 0 {
		return store.Ref{}, refNotFound(name)
	}
	return refs[0], nil
}

// ListRefs implements store.BranchRegistry: the refs whose name starts with
// prefix, by name in code-point order.
func (r *ReadOnlyBranchRegistry) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	return query(ctx, &r.roView, "refs", "list refs", sqlRefsFrom, scanRef, prefix, prefix)
}

func scanRef(rows *sql.Rows) (store.Ref, error) {
	var ref store.Ref
	return ref, rows.Scan(&ref.Name, &ref.ExecutionID, &ref.Version)
}
