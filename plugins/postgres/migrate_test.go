package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
)

// ledger returns the versions recorded in the schema's schema_migrations.
func ledger(t *testing.T, schema string) []int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	rows, err := conn.Query(ctx, `SELECT version FROM `+quoted(schema)+`.schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return versions
}

func allVersions() []int {
	var out []int
	for _, m := range schemaMigrations {
		out = append(out, m.version)
	}
	return out
}

// Eight nodes opening one new schema at once: the advisory lock serializes
// them, every Open succeeds, and each migration is applied exactly once.
func TestMigrationsConcurrentOpen(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const nodes = 8
	dbs := make([]*DB, nodes)
	errs := make([]error, nodes)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			<-start
			dbs[i], errs[i] = Open(context.Background(), testOptions(t, schema))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: Open: %v", i, err)
			continue
		}
		if err := dbs[i].Close(); err != nil {
			t.Errorf("node %d: Close: %v", i, err)
		}
	}
	if got := ledger(t, schema); !slices.Equal(got, allVersions()) {
		t.Fatalf("ledger = %v, want %v", got, allVersions())
	}
}

// A schema migrated by a newer release is refused with a typed error, and
// nothing is changed.
func TestMigrationsRefuseNewerSchema(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openDB(t, schema)
	known := len(schemaMigrations)
	adminExec(t, `INSERT INTO `+quoted(schema)+`.schema_migrations (version, name) VALUES ($1, 'from the future')`, known+1)
	_, err := Open(context.Background(), testOptions(t, schema))
	var ve *SchemaVersionError
	if !errors.Is(err, ErrSchemaTooNew) || !errors.As(err, &ve) || ve.Found != known+1 || ve.Known != known || ve.Schema != schema {
		t.Fatalf("Open of a newer schema = %v, want a SchemaVersionError (found %d, known %d)", err, known+1, known)
	}
	if got := ledger(t, schema); len(got) != known+1 {
		t.Fatalf("ledger = %v after the refusal, want it unchanged", got)
	}
}

// An older schema is brought up to date step by step, keeping its data.
func TestMigrationsUpgradeKeepsData(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	old := openDB(t, schema, func(o *Options) { o.migrations = schemaMigrations[:1] })
	writeAsBefore(t, old, map[string][]event.Envelope{"exec-old": batch("exec-old", 0, 2)})
	if got := ledger(t, schema); !slices.Equal(got, []int{1}) {
		t.Fatalf("ledger of the old release = %v, want [1]", got)
	}
	cur := openDB(t, schema)
	if got := ledger(t, schema); !slices.Equal(got, allVersions()) {
		t.Fatalf("ledger after the upgrade = %v, want %v", got, allVersions())
	}
	if n := len(logOf(t, cur.EventStore(), "exec-old")); n != 2 {
		t.Fatalf("the old log holds %d events after the upgrade, want 2", n)
	}
	if _, err := cur.BranchRegistry().CreateRef(context.Background(), "main", "exec-old"); err != nil {
		t.Fatalf("a table of a later migration: %v", err)
	}
}

// A migration list out of order is a programming error, refused before
// anything is written.
func TestMigrationsOutOfOrderRefused(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	bad := []migration{{2, "two", nil, nil}}
	_, err := Open(context.Background(), testOptions(t, schema, func(o *Options) { o.migrations = bad }))
	if err == nil {
		t.Fatal("Open with a migration numbered 2 first succeeded")
	}
	if n := adminQueryInt(t, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema); n != 0 {
		t.Fatal("the refused Open created the schema")
	}
}

// writeAsBefore writes logs into db's schema the way the releases before
// the status index did: the append statement without its index parts,
// which a schema migrated only that far can run. (The stores of db cannot:
// their appends keep the index.)
func writeAsBefore(t *testing.T, db *DB, logs map[string][]event.Envelope) {
	t.Helper()
	ctx := context.Background()
	for id, evs := range logs {
		b, _, err := newAppendBatch(id, 0, unfenced, evs)
		if err != nil {
			t.Fatal(err)
		}
		b.indexed, b.cataloged = false, false // the plain statement, with no index or catalog part
		pb := &pgx.Batch{}
		b.queue(pb, &db.q, db.channel)
		if err := db.pool.SendBatch(ctx, pb).Close(); err != nil {
			t.Fatalf("write %q as the old release did: %v", id, err)
		}
	}
}
