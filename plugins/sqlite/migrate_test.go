package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// ledger returns the versions recorded in schema_migrations.
func ledger(t *testing.T, db *DB) []int {
	t.Helper()
	rows, err := db.read.QueryContext(context.Background(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return out
}

func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	var n int
	if err := db.read.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func openAt(t *testing.T, path string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

func closeDB(t *testing.T, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestMigrationsRecordEveryVersionOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	want := []int{}
	for _, m := range schemaMigrations {
		want = append(want, m.version)
	}
	for range 3 {
		db := openAt(t, path)
		if got := ledger(t, db); !slices.Equal(got, want) {
			t.Fatalf("schema_migrations holds %v, want %v", got, want)
		}
		closeDB(t, db)
	}
}

// extend returns list followed by one step per stmts, numbered on.
func extend(list []migration, steps ...[]string) []migration {
	out := slices.Clone(list)
	for _, stmts := range steps {
		out = append(out, migration{len(out) + 1, "test step", stmts, nil})
	}
	return out
}

// counting is the schema plus steps that insert a row each time they run,
// so a re-applied step shows as an extra row.
var counting = extend(schemaMigrations,
	[]string{`CREATE TABLE applied (step INTEGER NOT NULL)`, `INSERT INTO applied VALUES (1)`},
	[]string{`INSERT INTO applied VALUES (2)`},
)

func TestMigrationsAreNotReappliedOnReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	for range 3 {
		db := openAt(t, path, withMigrations(counting))
		if n := countRows(t, db, "applied"); n != 2 {
			t.Fatalf("applied holds %d rows, want 2: a step ran twice or not at all", n)
		}
		closeDB(t, db)
	}
	third := extend(counting, []string{`INSERT INTO applied VALUES (3)`})
	db := openAt(t, path, withMigrations(third))
	defer closeDB(t, db)
	if n := countRows(t, db, "applied"); n != 3 {
		t.Fatalf("after adding a step, applied holds %d rows, want 3", n)
	}
	if got := ledger(t, db); len(got) != len(third) || got[len(got)-1] != len(third) {
		t.Fatalf("schema_migrations holds %v, want 1..%d", got, len(third))
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	closeDB(t, openAt(t, path))
	older := schemaMigrations[:len(schemaMigrations)-1]
	db, err := Open(path, withMigrations(older))
	if err == nil {
		closeDB(t, db)
		t.Fatal("Open of a newer schema succeeded")
	}
	var ve *SchemaVersionError
	if !errors.Is(err, ErrSchemaTooNew) || !errors.As(err, &ve) {
		t.Fatalf("Open = %v, want a *SchemaVersionError", err)
	}
	if ve.Found != len(schemaMigrations) || ve.Known != len(older) {
		t.Fatalf("SchemaVersionError %+v, want Found %d Known %d", ve, len(schemaMigrations), len(older))
	}
	// The refusal changed nothing: the current code still opens the file.
	db = openAt(t, path)
	if got := ledger(t, db); len(got) != len(schemaMigrations) {
		t.Fatalf("schema_migrations holds %v after the refusal", got)
	}
	closeDB(t, db)
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	broken := extend(counting, []string{
		`CREATE TABLE half (x INTEGER)`,
		`INSERT INTO no_such_table VALUES (1)`,
	})
	if db, err := Open(path, withMigrations(broken)); err == nil {
		closeDB(t, db)
		t.Fatal("Open with a failing migration succeeded")
	}
	db := openAt(t, path, withMigrations(counting))
	defer closeDB(t, db)
	if got := ledger(t, db); len(got) != len(counting) {
		t.Fatalf("schema_migrations holds %v, want 1..%d", got, len(counting))
	}
	var n int
	err := db.read.QueryRowContext(context.Background(),
		`SELECT COUNT(*) FROM sqlite_schema WHERE name = 'half'`).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("the failed step left its table behind (%d, %v)", n, err)
	}
}

func TestMigrationListMustBeNumberedInOrder(t *testing.T) {
	bad := []migration{{2, "skips one", nil, nil}}
	if db, err := Open(filepath.Join(t.TempDir(), "m.db"), withMigrations(bad)); err == nil {
		closeDB(t, db)
		t.Fatal("Open accepted a migration list that does not start at 1")
	}
}
