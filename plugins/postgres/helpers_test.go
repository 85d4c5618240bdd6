package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/groupcommit/writertest"
	"github.com/loom-kernel/loom/store"
)

// dsnEnv names the variable that points the tests at a PostgreSQL server.
const dsnEnv = "LOOM_TEST_POSTGRES_DSN"

// testDSN returns the server's DSN. The PostgreSQL tests never skip: without
// a server they fail and say how to get one.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		t.Fatalf("%s is not set: the plugins/postgres tests need a PostgreSQL server and never skip. "+
			"Run ./scripts/test.sh, which starts a throwaway cluster, or start one by hand with "+
			"eval \"$(./scripts/pg-start.sh)\" (stop it with ./scripts/pg-stop.sh)", dsnEnv)
	}
	return dsn
}

// newSchema returns a fresh schema name, unique to the test, and drops the
// schema (if the test created it) at cleanup, after the stores registered
// later have closed, so tests run in parallel and leave nothing behind.
func newSchema(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "loomtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { adminExec(t, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`) })
	return name
}

// adminExec runs one statement on a connection of its own (no pool, so no
// goroutine outlives the call).
func adminExec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	_, err = conn.Exec(ctx, sql, args...)
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// adminQueryInt runs a query returning one integer on a connection of its own.
func adminQueryInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var n int64
	err = conn.QueryRow(ctx, sql, args...).Scan(&n)
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// testOptions are the options of a DB on schema, with edit applied.
func testOptions(t testing.TB, schema string, edit ...func(*Options)) Options {
	o := Options{DSN: testDSN(t), Schema: schema}
	for _, e := range edit {
		e(&o)
	}
	return o
}

// openDB opens a DB on schema and closes it at cleanup.
func openDB(t testing.TB, schema string, edit ...func(*Options)) *DB {
	t.Helper()
	db, err := Open(context.Background(), testOptions(t, schema, edit...))
	if err != nil {
		t.Fatalf("Open(schema %q): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// openTestDB opens a DB on a fresh schema.
func openTestDB(t testing.TB, edit ...func(*Options)) *DB {
	t.Helper()
	return openDB(t, newSchema(t), edit...)
}

// batch returns n contiguous envelopes of exec from seq.
func batch(exec string, from int64, n int) []event.Envelope { return writertest.Batch(exec, from, n) }

func mustAppend(t testing.TB, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	writertest.MustAppend(t, s, exec, expected, evs)
}

// logOf reads the whole log of exec and checks that its sequences are
// contiguous from 0.
func logOf(t testing.TB, s store.EventStore, exec string) []event.Envelope {
	t.Helper()
	return writertest.Log(t, s, exec)
}

func isConflict(err error) bool {
	var ce *store.SequenceConflictError
	return errors.As(err, &ce)
}

func isFenced(err error) bool {
	var fe *store.FencedError
	return errors.As(err, &fe)
}

// quoted returns schema as a quoted identifier.
func quoted(schema string) string { return pgx.Identifier{schema}.Sanitize() }
