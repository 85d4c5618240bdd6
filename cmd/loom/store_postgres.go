package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/plugins/postgres"
	"github.com/loom-kernel/loom/store"
)

// schemaParam names the DSN query parameter that picks the Loom schema
// (default postgres.DefaultSchema); it is removed before connecting.
const schemaParam = "loom_schema"

// openPostgres opens a Loom PostgreSQL store for reading. The schema must
// already hold a Loom store — checked first over a plain connection, since
// the plugin would create and migrate it. Its subscriptions are woken by
// LISTEN/NOTIFY across processes, so followers need no polling.
func openPostgres(ctx context.Context, dsn string) (*openedStore, error) {
	dsn, schema, err := splitSchema(dsn)
	if err != nil {
		return nil, usagef("--store: %v", err)
	}
	if err := probePostgresSchema(ctx, dsn, schema); err != nil {
		return nil, err
	}
	st, err := postgres.Storage(ctx, postgres.Options{DSN: dsn, Schema: schema})
	if err != nil {
		var sv *postgres.SchemaVersionError
		if errors.As(err, &sv) {
			return nil, unsupportedf("schema %q was written by a newer Loom: use a newer loom binary", schema)
		}
		return nil, fmt.Errorf("opening the PostgreSQL store (schema %q): %w", schema, err)
	}
	sub, _ := st.Events.(store.Subscriber)
	src := inspect.Source{Events: st.Events, Snapshots: st.Snapshots, Branches: st.Branches}
	if sub != nil {
		src.Follow = sub.Subscribe
	}
	return &openedStore{Source: src, name: "postgres schema " + schema, close: st.Close}, nil
}

// splitSchema removes the loom_schema parameter from a DSN URL.
func splitSchema(dsn string) (string, string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("not a PostgreSQL URL (postgres://user@host/db?loom_schema=loom)")
	}
	q := u.Query()
	schema := q.Get(schemaParam)
	if schema == "" {
		schema = postgres.DefaultSchema
	}
	q.Del(schemaParam)
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// probePostgresSchema refuses a database whose schema holds no Loom store.
func probePostgresSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('schema_migrations', 'events')`, schema).Scan(&n)
	if err != nil {
		return fmt.Errorf("reading PostgreSQL's catalog: %w", err)
	}
	if n != 2 {
		return notFoundf("no Loom store in schema %q: pass the schema your app writes with ?%s=NAME", schema, schemaParam)
	}
	return nil
}
