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
	rt, err := loom.New(loom.Config{Events: st.Events, Snapshots: st.Snapshots, Flows: []*loom.Flow{flow}})
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
	rt.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	store := withSchema(t, dsn, schema)
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
}
