package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/store"
)

// A borrowed pool is the caller's: the store uses it (appends, reads,
// subscriptions) and, once closed, refuses every call with store.ErrClosed,
// but the pool stays open and usable.
func TestBorrowedPoolIsNeverClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := Storage(ctx, Options{Pool: pool, Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, st.Events, "exec-b", 0, batch("exec-b", 0, 2))
	sn, err := st.Events.(store.Subscriber).Subscribe(ctx, "exec-b", 0)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, sn, batch("exec-b", 0, 2))
	if _, err := st.Content.Put(ctx, []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sn.Err(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Fatalf("subscription ended with %v, want nil or store.ErrClosed", err)
	}
	if err := st.Events.Append(ctx, "exec-b", 2, batch("exec-b", 2, 1)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Append after Close = %v, want store.ErrClosed", err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the borrowed pool after Close: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+quoted(st.DB.Schema())+`.events`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("reading through the borrowed pool after Close = %d, %v; want 2 events", n, err)
	}
}

// A DB opened on a DSN owns its pool and closes it.
func TestOwnedPoolIsClosed(t *testing.T) {
	t.Parallel()
	db, err := Open(context.Background(), testOptions(t, newSchema(t)))
	if err != nil {
		t.Fatal(err)
	}
	pool := db.Pool()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(context.Background()); err == nil {
		t.Fatal("the DB's own pool still answers after Close")
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close = %v, want the first one's nil", err)
	}
}

// Closing one store of the preset only detaches it; Stores.Close closes all.
func TestStorageViewsShareTheDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Storage(ctx, testOptions(t, newSchema(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Events.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Events.ReadFrom(ctx, "x", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ReadFrom on the closed view = %v, want store.ErrClosed", err)
	}
	if _, err := st.Branches.CreateRef(ctx, "main", "x"); err != nil {
		t.Fatalf("the other views after one closed: %v", err)
	}
	if _, err := st.Leases.Acquire(ctx, "x", "node-a", 100, 1_000); err != nil {
		t.Fatalf("the lease view after another closed: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Branches.ReadRef(ctx, "main"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ReadRef after Stores.Close = %v, want store.ErrClosed", err)
	}
	if _, _, err := st.Leases.Get(ctx, "x"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Leases.Get after Stores.Close = %v, want store.ErrClosed", err)
	}
}

func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testDSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for name, o := range map[string]Options{
		"neither DSN nor pool": {},
		"both DSN and pool":    {DSN: dsn, Pool: pool},
		"bad DSN":              {DSN: "postgres://%zz"},
		"schema with NUL":      {DSN: dsn, Schema: "a\x00b"},
		"schema not UTF-8":     {DSN: dsn, Schema: "a\xffb"},
		"schema too long":      {DSN: dsn, Schema: strings.Repeat("s", 64)},
	} {
		if _, err := Open(ctx, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: Open = %v, want ErrInvalidOption", name, err)
		}
	}
}

// With synchronous_commit off a commit returns before it is durable, so
// Open refuses the server unless told to accept it.
func TestAsynchronousCommitRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	async := Options{DSN: dsn + sep + "synchronous_commit=off", Schema: newSchema(t)}
	if _, err := Open(ctx, async); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "synchronous_commit") {
		t.Fatalf("Open with synchronous_commit=off = %v, want ErrInvalidOption naming it", err)
	}
	async.AllowAsynchronousCommit = true
	db, err := Open(ctx, async)
	if err != nil {
		t.Fatalf("Open allowing asynchronous commit: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// Any schema name PostgreSQL can hold works: it is always quoted, so mixed
// case, spaces, quotes and SQL fragments name a schema and nothing else.
func TestSchemaNamesAreQuoted(t *testing.T) {
	t.Parallel()
	base := newSchema(t)
	odd := []string{base + `_Mixed "Case"; DROP SCHEMA public --`, strings.ToUpper(base)}
	for _, s := range odd {
		t.Cleanup(func() { adminExec(t, `DROP SCHEMA IF EXISTS `+quoted(s)+` CASCADE`) })
	}
	for i, schema := range odd {
		db := openDB(t, schema)
		exec := "exec-" + string(rune('a'+i))
		mustAppend(t, db.EventStore(), exec, 0, batch(exec, 0, i+1))
		if n := adminQueryInt(t, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema); n != tablesOfSchema() {
			t.Fatalf("schema %q holds %d tables, want %d", schema, n, tablesOfSchema())
		}
	}
	for i, schema := range odd {
		if n := adminQueryInt(t, `SELECT count(*) FROM `+quoted(schema)+`.events`); n != int64(i+1) {
			t.Fatalf("schema %q holds %d events, want %d: schemas are not kept apart", schema, n, i+1)
		}
	}
	if adminQueryInt(t, `SELECT count(*) FROM pg_namespace WHERE nspname = 'public'`) != 1 {
		t.Fatal("the public schema is gone")
	}
}

// tablesOfSchema is the number of tables a migrated schema holds: those
// the migrations create, and schema_migrations.
func tablesOfSchema() int64 {
	n := int64(1)
	for _, m := range schemaMigrations {
		for _, stmt := range m.stmts {
			if strings.HasPrefix(stmt, "CREATE TABLE ") {
				n++
			}
		}
	}
	return n
}
