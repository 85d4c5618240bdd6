package auditchain_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/postgres"
)

// postgresDSN is the server of the PostgreSQL tests, which never skip:
// without LOOM_TEST_POSTGRES_DSN they fail and say how to get one, as the
// other PostgreSQL tests of the repository do.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LOOM_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Fatal("LOOM_TEST_POSTGRES_DSN is not set: these tests need a PostgreSQL server and never skip; " +
			"run ./scripts/test.sh, or eval \"$(./scripts/pg-start.sh)\" first")
	}
	return dsn
}

// freshSchema returns a schema name unique to the test and drops the
// schema at cleanup.
func freshSchema(t *testing.T, dsn string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "loomaudit_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("dropping %s: %v", name, err)
			return
		}
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return name
}

// TestChainTamperPostgres tampers with rows of a PostgreSQL schema
// directly, in the log and (compacted) in the archive.
func TestChainTamperPostgres(t *testing.T) {
	for name, compacted := range map[string]bool{"Log": false, "Compacted": true} {
		t.Run(name, func(t *testing.T) { tamperPostgres(t, compacted) })
	}
}

func tamperPostgres(t *testing.T, compacted bool) {
	dsn := postgresDSN(t)
	schema := freshSchema(t, dsn)
	ctx := testContext(t)
	opts := postgres.Options{DSN: dsn, Schema: schema}
	st, err := postgres.Storage(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuditedApp(t, st.Events, st.Snapshots, st.Branches, st.Archive, st.Close, auditchain.Options{Key: testKey})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	d := dialect{
		table:      pgx.Identifier{schema, "events"}.Sanitize(),
		archive:    pgx.Identifier{schema, "archive"}.Sanitize(),
		timestamp:  "timestamp_ms",
		arg:        func(n int) string { return fmt.Sprintf("$%d", n) },
		dropMember: `(metadata::jsonb - '` + auditchain.MetadataKey + `')::text`,
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := conn.Exec(ctx, q, args...)
			return err
		},
	}
	runTamperCases(t, a, d, compacted, func(id string, vo auditchain.Options) auditchain.Result {
		st, err := postgres.Storage(testContext(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}()
		vo.Archive = st.Archive
		return verifyIn(t, st.Events, id, vo)
	})
}
