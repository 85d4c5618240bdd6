package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	msqlite "modernc.org/sqlite"

	"github.com/loom-kernel/loom/plugins/postgres"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// Where workload f keeps its populations, one per size: a SQLite file, or
// a PostgreSQL schema of the run, opened through the plugin's Storage
// preset (every store the preset wires, leases and timers included) as an
// application would open it.

// scaleStorage opens and sizes the population of n executions.
type scaleStorage interface {
	// open opens (creating on the first call) the population's storage.
	open(ctx context.Context, n int) (scaleStores, error)
	// size measures the population's storage, which must be closed.
	size(ctx context.Context, n int) (storageSize, error)
}

// scaleStores is one opening of a population's storage.
type scaleStores struct {
	preset       store.Provider // for loom.Config.Storage
	events       store.EventStore
	transactions func() int64 // the writer's committed append transactions so far
	close        func() error
}

// storageSize is what a population occupies.
type storageSize struct {
	total int64
	// SQLite: the main file and the WAL after a TRUNCATE checkpoint.
	mainFile, wal int64
}

// scaleStorageFor is the SQLite files in dir, or the PostgreSQL run's
// schemas when pg is set.
//
// workload names the workload the populations are built for ("f", "h"):
// their files and schemas carry it, so two workloads never share one.
func scaleStorageFor(workload, dir string, sync sqlite.Synchronous, pg *pgRun) scaleStorage {
	if pg != nil {
		return &pgScale{workload: workload, run: pg, schemas: map[int]string{}}
	}
	return sqliteScale{workload: workload, dir: dir, sync: sync}
}

// sqliteScale keeps the population of n executions in
// dir/<workload>-<n>.db.
type sqliteScale struct {
	workload string
	dir      string
	sync     sqlite.Synchronous
}

func (s sqliteScale) path(n int) string {
	return filepath.Join(s.dir, s.workload+"-"+strconv.Itoa(n)+".db")
}

// open implements scaleStorage with sqlite.Storage and its defaults.
func (s sqliteScale) open(_ context.Context, n int) (scaleStores, error) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: s.path(n), Synchronous: s.sync})
	if err != nil {
		return scaleStores{}, err
	}
	return scaleStores{preset: st, events: st.Events, close: st.Close,
		transactions: func() int64 { return st.DB.WriteStats().Transactions }}, nil
}

// size implements scaleStorage: it checkpoints the WAL into the main file
// (TRUNCATE, on a connection of its own, the plugin's writer pragmas) and
// adds up the main file and what is left of the WAL.
func (s sqliteScale) size(ctx context.Context, n int) (storageSize, error) {
	path := s.path(n)
	c, err := msqlite.NewConnector(rawWriterDSN(path, s.sync))
	if err != nil {
		return storageSize{}, err
	}
	db := sql.OpenDB(c)
	var busy, logPages, checkpointed int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &checkpointed)
	if err = errors.Join(err, db.Close()); err != nil {
		return storageSize{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	var sz storageSize
	if sz.mainFile, err = fileSize(path); err != nil {
		return sz, err
	}
	if sz.wal, err = fileSize(path + "-wal"); err != nil {
		return sz, err
	}
	sz.total = sz.mainFile + sz.wal
	return sz, nil
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// pgScale keeps the population of n executions in the run's schema
// <prefix><workload><n>, dropped with the others at the run's end.
type pgScale struct {
	workload string
	run      *pgRun
	mu       sync.Mutex
	schemas  map[int]string
}

// schema names (and on the first call records) the population's schema.
func (p *pgScale) schema(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.schemas[n]
	if !ok {
		s = p.run.newSchema(p.workload + strconv.Itoa(n))
		p.schemas[n] = s
	}
	return s
}

// open implements scaleStorage with postgres.Storage and its defaults.
func (p *pgScale) open(ctx context.Context, n int) (scaleStores, error) {
	st, err := postgres.Storage(ctx, postgres.Options{DSN: p.run.dsn, Schema: p.schema(n)})
	if err != nil {
		return scaleStores{}, err
	}
	return scaleStores{preset: st, events: st.Events, close: st.Close,
		transactions: func() int64 { return st.DB.WriteStats().Transactions }}, nil
}

// size implements scaleStorage: pg_total_relation_size (heap, indexes,
// TOAST) of every table in the schema.
func (p *pgScale) size(ctx context.Context, n int) (storageSize, error) {
	var sz storageSize
	err := p.run.pool.QueryRow(ctx, `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relkind IN ('r', 'm', 'p')`, p.schema(n)).Scan(&sz.total)
	if err != nil {
		return sz, fmt.Errorf("postgres: size of %s: %w", p.schema(n), err)
	}
	return sz, nil
}

// memoryReading is the process's memory once the garbage collector ran
// and returned what it could to the OS.
type memoryReading struct {
	rss        int64  // VmRSS, 0 where /proc/self/status is missing
	heapInuse  uint64 // runtime.MemStats.HeapInuse
	goroutines int
}

// readMemory collects garbage, frees what it can to the OS and reads the
// process's memory.
func readMemory() (memoryReading, error) {
	debug.FreeOSMemory() // a forced GC first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memoryReading{heapInuse: ms.HeapInuse, goroutines: runtime.NumGoroutine()}
	rss, err := vmRSS()
	m.rss = rss
	return m, err
}

// vmRSS reads VmRSS from /proc/self/status, in bytes; 0 without /proc.
func vmRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close() // read-only: nothing is lost if closing fails
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/self/status: VmRSS %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	return 0, errors.Join(errors.New("/proc/self/status: no VmRSS"), sc.Err())
}
