package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// openedStore is a store opened for reading, and how to close it.
type openedStore struct {
	inspect.Source
	// archive holds the events compaction moved out of the logs.
	archive store.ArchiveStore
	// name says which store, in messages ("incident.db").
	name  string
	close func() error
}

// openStore opens the store --store names (or $LOOM_STORE), for reading
// only. It is the one place that knows store kinds.
func (c *cli) openStore(spec string) (*openedStore, error) {
	spec = storeSpec(spec)
	switch {
	case spec == "":
		return nil, usagef("--store is required: a SQLite file (for example incident.db) or a PostgreSQL DSN; or set LOOM_STORE")
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return openPostgres(c.ctx, spec)
	default:
		return c.openSQLite(strings.TrimPrefix(spec, "sqlite:"))
	}
}

// openSQLite opens a Loom SQLite file with sqlite.OpenReadOnly, which never
// writes: no migration, no checkpoint, no -wal, -shm or -journal created,
// and a crashed writer's -wal (or hot journal) read rather than ignored. A
// named pipe or another special file is refused before anything opens it.
// Followers (logs --follow, the inspector's live view) see the appends of
// the app's process as the files change.
func (c *cli) openSQLite(path string) (*openedStore, error) {
	db, err := sqlite.OpenReadOnly(path, sqlite.WithReadConns(2))
	var (
		sv  *sqlite.SchemaVersionError
		nas *sqlite.NotAStoreError
	)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notFoundf("no store at %s: pass the SQLite file your app writes (for example incident.db)", path)
	case errors.As(err, &sv):
		return nil, unsupportedf("%s was written by a newer Loom (schema %d; this loom knows up to %d) in a way this loom cannot read: use a newer loom binary (%v)",
			path, sv.Found, sv.Known, err)
	case errors.As(err, &nas) && strings.Contains(nas.Reason, "without a Loom store"):
		return nil, usagef("%s is a SQLite file without a Loom store in it: pass the file your app's runtime writes", path)
	case errors.As(err, &nas) && strings.HasPrefix(nas.Reason, "is not a SQLite file"):
		return nil, usagef("%s is not a SQLite file Loom can read: pass the file your app's runtime writes", path)
	case errors.As(err, &nas):
		return nil, usagef("%s %s: --store takes the SQLite file your app writes", path, nas.Reason)
	case err != nil:
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if s := db.Schema(); s.Found > s.Known {
		fmt.Fprintf(c.stderr, "loom: %s was written by a newer Loom (schema %d; this loom knows up to %d): reading what this loom understands\n",
			path, s.Found, s.Known)
	}
	events := db.EventStore()
	return &openedStore{
		Source: inspect.Source{Events: events, Snapshots: db.SnapshotStore(), Branches: db.BranchRegistry(),
			Follow: events.Subscribe},
		archive: db.ArchiveStore(),
		name:    path,
		close:   db.Close,
	}, nil
}

// withStore opens --store, runs fn and closes the store, joining a close
// error into fn's.
func (c *cli) withStore(spec string, fn func(s *openedStore) error) (err error) {
	s, err := c.openStore(spec)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	return fn(s)
}
