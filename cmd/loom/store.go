package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, for the read-only schema probe

	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// openedStore is a store opened for reading, and how to close it.
type openedStore struct {
	inspect.Source
	// name says which store, in messages ("incident.db").
	name  string
	close func() error
}

// openStore opens the store --store names, for reading only. It is the one
// place that knows store kinds.
func openStore(ctx context.Context, spec string) (*openedStore, error) {
	switch {
	case spec == "":
		return nil, usagef("--store is required: a SQLite file (for example incident.db) or a PostgreSQL DSN; or set LOOM_STORE")
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return openPostgres(ctx, spec)
	default:
		return openSQLite(ctx, strings.TrimPrefix(spec, "sqlite:"))
	}
}

// openSQLite opens a Loom SQLite file without writing to it: the file must
// exist and hold a Loom schema, checked through a read-only connection
// before the plugin opens it (the plugin would create, and migrate, any file
// it is given). Followers (logs --follow, the inspector's live view) use the
// store's own subscriptions, which see the appends of the app's process
// through the plugin's data_version poller (sqlite.ChangePollInterval).
func openSQLite(ctx context.Context, path string) (*openedStore, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, notFoundf("no store at %s: pass the SQLite file your app writes (for example incident.db)", path)
	case err != nil:
		return nil, err
	case info.IsDir():
		return nil, usagef("%s is a directory: --store takes a SQLite file", path)
	}
	if err := probeLoomSchema(ctx, path); err != nil {
		return nil, err
	}
	db, err := sqlite.Open(path, sqlite.WithReadConns(2))
	if err != nil {
		var sv *sqlite.SchemaVersionError
		if errors.As(err, &sv) {
			return nil, unsupportedf("%s was written by a newer Loom (schema %d, this loom knows %d): use a newer loom binary", path, sv.Found, sv.Known)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	events := db.EventStore()
	return &openedStore{
		Source: inspect.Source{Events: events, Snapshots: db.SnapshotStore(), Branches: db.BranchRegistry(),
			Follow: events.Subscribe},
		name:  path,
		close: db.Close,
	}, nil
}

// probeLoomSchema refuses a file that is not SQLite or holds no Loom schema.
func probeLoomSchema(ctx context.Context, path string) error {
	q := url.Values{"mode": {"ro"}, "_pragma": {"busy_timeout(5000)"}}
	conn, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer conn.Close()
	var n int
	err = conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('schema_migrations', 'events')`).Scan(&n)
	if err != nil {
		return usagef("%s is not a SQLite file Loom can read (%v)", path, err)
	}
	if n != 2 {
		return usagef("%s is a SQLite file without a Loom store in it: pass the file your app's runtime writes", path)
	}
	return nil
}

// withStore opens --store, runs fn and closes the store, joining a close
// error into fn's.
func (c *cli) withStore(spec string, fn func(s *openedStore) error) (err error) {
	s, err := openStore(c.ctx, spec)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	return fn(s)
}
