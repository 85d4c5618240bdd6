package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/postgres"
)

// postgresDSN is the throwaway cluster ./scripts/test.sh starts. These tests
// never skip: without it they fail, saying how to get one.
func postgresDSN(t *testing.T) string {
	dsn := os.Getenv("LOOM_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Fatal("LOOM_TEST_POSTGRES_DSN is not set: run ./scripts/test.sh, or eval \"$(./scripts/pg-start.sh)\" first")
	}
	return dsn
}

func withSchema(t *testing.T, dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(schemaParam, schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestReadCommandsOnPostgreSQL writes executions through a runtime on a
// fresh PostgreSQL schema and reads them back with the real binary.
func TestReadCommandsOnPostgreSQL(t *testing.T) {
	bin, _ := setup(t)
	dsn := postgresDSN(t)
	schema := fmt.Sprintf("loomcli_%d", rand.Uint64())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	st, err := postgres.Storage(ctx, postgres.Options{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	flow := loom.NewFlow("pg.order", func(c *loom.Context, n int) (int, error) {
		if _, err := loom.Decide(c, "double", func() (int, error) { return 2 * n, nil }); err != nil {
			return 0, err
		}
		return loom.Suspend[int](c, "approve")
	})
	// The log is chained (unkeyed) and pg-0 compacted, so audit verify
	// reads the archive and the compaction point through the CLI's reader.
	chained, err := auditchain.Wrap(st.Events, auditchain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := auditchain.WrapArchive(st.Archive)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Events: chained, Snapshots: st.Snapshots, Archive: archive, Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprintf("pg-%d", i)
		if _, err := rt.Start(ctx, "pg.order", i, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := rt.Compact(ctx, "pg-0", 1); err != nil || res.Archived != 1 {
		t.Fatalf("Compact = %+v, %v", res, err)
	}
	rt.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	store := withSchema(t, dsn, schema)
	if out := mustLoom(t, bin, "audit", "verify", "--all", "--store", store); strings.Count(out, "chain intact") != 3 {
		t.Fatalf("audit verify --all on PostgreSQL:\n%s", out)
	}
	out := mustLoom(t, bin, "ls", "--store", store)
	for i := range 3 {
		if !strings.Contains(out, fmt.Sprintf("pg-%d", i)) || !strings.Contains(out, "suspended") {
			t.Fatalf("ls:\n%s", out)
		}
	}
	var state struct{ Status string }
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "state", "pg-1", "--store", store, "--json")), &state); err != nil || state.Status != "suspended" {
		t.Fatalf("state: %+v %v", state, err)
	}
	if out := mustLoom(t, bin, "replay-check", "pg-2", "--store", store); !strings.Contains(out, "matches byte for byte") {
		t.Fatalf("replay-check:\n%s", out)
	}

	// Nothing is written, on the current schema or on an older one: not a
	// row, not a migration.
	pgReadOnlyCommands(t, bin, dsn, schema, store)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{`DELETE FROM ` + q + `.schema_migrations WHERE version > 2`,
		`DROP TABLE ` + q + `.refs`, `DROP TABLE IF EXISTS ` + q + `.unfinished`} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	pgReadOnlyCommands(t, bin, dsn, schema, store)
}

// pgReadOnlyCommands runs the read-only commands on a PostgreSQL store and
// checks that every table of its schema holds exactly what it held.
func pgReadOnlyCommands(t *testing.T, bin, dsn, schema, store string) {
	t.Helper()
	before := pgDigest(t, dsn, schema)
	for _, args := range [][]string{
		{"ls", "--json", "--sort", "updated"},
		{"state", "pg-0"},
		{"logs", "pg-1", "--internal"},
		{"diff", "pg-1", "--from", "0"},
		{"replay-check", "pg-0"},
		{"gate", "pg-2"},
		{"audit", "verify", "pg-0"},
	} {
		mustLoom(t, bin, append(args, "--store", store)...)
	}
	if out := mustLoom(t, bin, "gate", "pg-2", "--store", store); !strings.Contains(out, "Gate       approve, since #") {
		t.Fatalf("gate --store on PostgreSQL:\n%s", out)
	}
	if after := pgDigest(t, dsn, schema); after != before {
		t.Fatalf("the read-only commands changed the schema:\n%s\n%s", before, after)
	}
}

// pgDigest summarizes every table of schema: its name and an MD5 of its
// rows.
func pgDigest(t *testing.T, dsn, schema string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		q := pgx.Identifier{schema, table}.Sanitize()
		var sum *string
		if err := conn.QueryRow(ctx, `SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM `+q+` t`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%v ", table, ptrString(sum))
	}
	return b.String()
}

func ptrString(s *string) string {
	if s == nil {
		return "empty"
	}
	return *s
}
