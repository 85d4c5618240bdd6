package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// dsnEnv names the variable that points the tests at a PostgreSQL server.
const dsnEnv = "LOOM_TEST_POSTGRES_DSN"

// TestHarnessOnPostgres runs workloads a and c on PostgreSQL in-process
// and checks the document's shape, as TestHarnessReportsEveryField does,
// and that every schema the run created is gone afterwards.
func TestHarnessOnPostgres(t *testing.T) {
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		t.Fatalf("%s is not set: the bench PostgreSQL test needs a PostgreSQL server and never skips. "+
			"Run ./scripts/test.sh, which starts a throwaway cluster, or start one by hand with "+
			"eval \"$(./scripts/pg-start.sh)\" (stop it with ./scripts/pg-stop.sh)", dsnEnv)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := benchSchemas(t, conn)

	doc := runHarness(t, "-postgres", dsn, "-workloads", "a,c", "-duration", "200ms")
	if s := lookup(t, doc, "config.store"); s != "postgres" {
		t.Errorf("config.store = %v, want postgres", s)
	}
	numbers := []string{"machine.cpus", "raw.oneRowPerCommitPerSec", "raw.hundredRowsPerTxPerSec",
		"raw.thirtyTwoConnsOneRowPerCommitPerSec", "raw.payloadBytes",
		"workloads.c.thirtyTwoConnsBaselineValue", "workloads.c.thirtyTwoConnsRatio"}
	for _, w := range []string{"a", "c"} {
		for _, f := range []string{"workers", "workflows", "workflowsPerSec", "eventsPerSec", "eventsPerWorkflow",
			"appendsPerWorkflow", "transactionsPerWorkflow", "p50Ms", "p99Ms", "baselineValue", "ratio", "target"} {
			numbers = append(numbers, "workloads."+w+"."+f)
		}
	}
	for _, path := range numbers {
		if n, ok := lookup(t, doc, path).(json.Number); !ok || n == "0" {
			t.Errorf("%s = %v, want a non-zero number", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"config.synchronous", "config.postgres.serverVersion", "config.postgres.fsync",
		"workloads.a.baseline", "workloads.c.baseline"} {
		if s, ok := lookup(t, doc, path).(string); !ok || s == "" {
			t.Errorf("%s = %v, want a non-empty string", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"workloads.a.met", "workloads.c.met"} {
		if _, ok := lookup(t, doc, path).(bool); !ok {
			t.Errorf("%s = %v, want a bool", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"raw.oneRowPerCommitSamples", "raw.hundredRowsPerTxSamples",
		"raw.thirtyTwoConnsOneRowPerCommitSamples", "workloads.a.baselineSamples",
		"workloads.c.baselineSamples", "workloads.c.thirtyTwoConnsBaselineSamples"} {
		if l, ok := lookup(t, doc, path).([]any); !ok || len(l) == 0 {
			t.Errorf("%s = %v, want a non-empty list", path, lookup(t, doc, path))
		}
	}
	for path, want := range map[string]string{
		"workloads.a.eventsPerWorkflow": "22",
		"workloads.c.eventsPerWorkflow": "22",
		"workloads.c.workers":           "32",
	} {
		if got := lookup(t, doc, path); got != json.Number(want) {
			t.Errorf("%s = %v, want %s", path, got, want)
		}
	}
	workloads := lookup(t, doc, "workloads").(map[string]any)
	for _, w := range []string{"b", "d"} {
		if _, ok := workloads[w]; ok {
			t.Errorf("workloads.%s reported, but not selected", w)
		}
	}

	// The run lists the schemas it created (raw, a, c): each must be gone,
	// and so must any other it left under the prefix.
	schemas, _ := lookup(t, doc, "config.postgres.schemas").([]any)
	if len(schemas) != 3 {
		t.Errorf("config.postgres.schemas = %v, want 3 (raw, a, c)", schemas)
	}
	after := benchSchemas(t, conn)
	for _, s := range schemas {
		if name, _ := s.(string); !strings.HasPrefix(name, pgSchemaPrefix) || after[name] {
			t.Errorf("schema %v: want a %s… schema dropped by the run", s, pgSchemaPrefix)
		}
	}
	for s := range after {
		if !before[s] {
			t.Errorf("schema %s left behind", s)
		}
	}
}

// benchSchemas lists the schemas whose name starts with pgSchemaPrefix.
func benchSchemas(t *testing.T, conn *pgx.Conn) map[string]bool {
	t.Helper()
	rows, _ := conn.Query(context.Background(),
		`SELECT schema_name FROM information_schema.schemata WHERE strpos(schema_name, $1) = 1`, pgSchemaPrefix)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}
