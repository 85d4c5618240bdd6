package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// catalogMigratedFrom writes logs into a new schema at the release before
// the catalog the way that release did — the append statement with its
// status index part and without the catalog's — then opens it with the
// current code (which migrates it) and returns its event store.
func catalogMigratedFrom(t *testing.T, logs map[string][]event.Envelope) *EventStore {
	t.Helper()
	ctx := context.Background()
	schema := newSchema(t)
	old := openDB(t, schema, func(o *Options) { o.migrations = schemaBefore(t, "execution catalog") })
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		b, _, err := newAppendBatch(id, 0, unfenced, logs[id])
		if err != nil {
			t.Fatal(err)
		}
		b.cataloged = false
		pb := &pgx.Batch{}
		b.queue(pb, &old.q, old.channel)
		if err := old.pool.SendBatch(ctx, pb).Close(); err != nil {
			t.Fatalf("write %q as the old release did: %v", id, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	return openDB(t, schema).EventStore()
}

// TestCatalogBackfill: a schema written before the catalog, with logs of
// every status, tenant principals of every shape and an unstamped
// CONTINUED, gets its catalog from the migration: exactly what the kit's
// rule gives each log, and the same catalog appends through the new code
// keep for the same logs; later writes keep it like any other.
func TestCatalogBackfill(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		logs := storetest.CatalogLogs(seed)
		migrated := catalogMigratedFrom(t, logs)
		storetest.CheckCatalogSearches(t, migrated, logs)
		kept := openTestDB(t).EventStore()
		storetest.AppendLogs(t, kept, logs, seed)
		storetest.CheckCatalogSearches(t, kept, logs)

		done := event.Envelope{ID: "t-acme#2", WorkflowID: "wf-tenants", ExecutionID: "t-acme", Type: event.ExecutionCompleted,
			Sequence: 2, Timestamp: logs["t-acme"][1].Timestamp + 1, Payload: json.RawMessage(`{}`)}
		logs["t-acme"] = append(logs["t-acme"], done)
		for _, s := range []*EventStore{migrated, kept} {
			mustAppend(t, s, "t-acme", 2, []event.Envelope{done})
			storetest.CheckCatalogSearches(t, s, logs)
		}
	}
}

// TestCatalogBackfillContinuedPostgresCannotParse: a CONTINUED whose
// metadata holds an escape PostgreSQL's json refuses to de-escape (\u0000,
// a lone surrogate) neither fails the migration nor is guessed: the
// migration's Go step decides it exactly — continued when kernel-stamped,
// else the status of the event before it, or pending.
func TestCatalogBackfillContinuedPostgresCannotParse(t *testing.T) {
	t.Parallel()
	ev := func(exec string, seq int64, typ string, meta map[string]json.RawMessage) event.Envelope {
		return event.Envelope{ID: fmt.Sprintf("%s#%d", exec, seq), WorkflowID: "wf", ExecutionID: exec,
			Type: typ, Sequence: seq, Timestamp: 10 + seq, Payload: json.RawMessage(`{"nextExecutionId":"succ"}`), Metadata: meta}
	}
	stamped := map[string]json.RawMessage{"kernel": json.RawMessage(`true`), "trace": json.RawMessage(`{"\u0000":"\ud800"}`)}
	unstamped := map[string]json.RawMessage{"trace": json.RawMessage(`{"\u0000":1}`)}
	logs := map[string][]event.Envelope{
		"nul-stamped": {ev("nul-stamped", 0, event.ExecutionStarted, nil), ev("nul-stamped", 1, event.ExecutionSuspended, nil),
			ev("nul-stamped", 2, event.ExecutionContinued, stamped)},
		"nul-unstamped": {ev("nul-unstamped", 0, event.ExecutionStarted, nil), ev("nul-unstamped", 1, event.ExecutionSuspended, nil),
			ev("nul-unstamped", 2, event.ExecutionContinued, unstamped)},
		"nul-pending": {ev("nul-pending", 0, "STEP_DONE", nil), ev("nul-pending", 1, event.ExecutionContinued, unstamped)},
	}
	s := catalogMigratedFrom(t, logs)
	want := []store.CatalogEntry{
		{ExecutionID: "nul-pending", WorkflowID: "wf", Status: store.CatalogPending, StartedAt: 10, StatusAt: 10},
		{ExecutionID: "nul-stamped", WorkflowID: "wf", Status: store.CatalogContinued, StartedAt: 10, StatusAt: 12},
		{ExecutionID: "nul-unstamped", WorkflowID: "wf", Status: store.CatalogSuspended, StartedAt: 10, StatusAt: 11},
	}
	if got := storetest.SearchCatalog(t, s, store.CatalogQuery{}, 2); !slices.Equal(got, want) {
		t.Fatalf("SearchExecutions = %+v, want %+v", got, want)
	}
	if got, _ := storetest.WantCatalog(logs, store.CatalogQuery{}); !slices.Equal(got, want) {
		t.Fatalf("the kit's rule gives %+v, the test wants %+v", got, want)
	}
}

// TestCatalogStepBatchesLeaveIt: a batch that moves no status writes no
// catalog row — not even an UPDATE that changes nothing — while one that
// moves it writes one; a trigger counts the writes.
func TestCatalogStepBatchesLeaveIt(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	q := quoted(schema)
	adminExec(t, `CREATE TABLE `+q+`.catalog_writes (execution_id text NOT NULL)`)
	adminExec(t, `CREATE FUNCTION `+q+`.count_catalog_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO `+q+`.catalog_writes VALUES (NEW.execution_id); RETURN NEW; END $$`)
	adminExec(t, `CREATE TRIGGER catalog_updated AFTER UPDATE ON `+q+`.catalog
		FOR EACH ROW EXECUTE FUNCTION `+q+`.count_catalog_write()`)
	s := db.EventStore()
	evs := batch("x", 0, 6)
	evs[0].Type = event.ExecutionStarted
	evs[4].Type = event.ExecutionSuspended
	mustAppend(t, s, "x", 0, evs[:1])
	mustAppend(t, s, "x", 1, evs[1:2])
	mustAppend(t, s, "x", 2, evs[2:4])
	if n := adminQueryInt(t, `SELECT count(*) FROM `+q+`.catalog_writes`); n != 0 {
		t.Fatalf("step batches wrote the catalog row %d times", n)
	}
	mustAppend(t, s, "x", 4, evs[4:])
	if n := adminQueryInt(t, `SELECT count(*) FROM `+q+`.catalog_writes`); n != 1 {
		t.Fatalf("a batch that suspends wrote the catalog row %d times, want once", n)
	}
}

// explain returns PostgreSQL's plan of the statement text with args.
func explain(t *testing.T, db *DB, text string, args []any) string {
	t.Helper()
	rows, err := db.pool.Query(context.Background(), "EXPLAIN "+text, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestCatalogQueriesUseTheirIndexes: at 100,000 executions, the first page
// and a page after a cursor, unfiltered or filtered by status, flow or
// tenant, walk the index of the search's order or of its filter and stop
// at the LIMIT — no sequential scan, no sort — and an id prefix reads a
// range of the primary key. Before ANALYZE (the migration runs it;
// autovacuum would) the planner guesses each filter's share and may sort
// what a bitmap scan of the same index found, never scan the table.
func TestCatalogQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	q := quoted(schema)
	adminExec(t, `INSERT INTO `+q+`.catalog SELECT 'exec-' || lpad(i::text, 6, '0'), 'wf-' || (i % 10), 'tenant-' || (i % 50),
		(ARRAY['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled', 'continued'])[i % 7 + 1],
		1000000 + i / 3, 1000000 + i FROM generate_series(0, 99999) AS i`)
	cursor := "1020000:exec-060001"
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			adminExec(t, `ANALYZE `+q+`.catalog`)
		}
		check := func(what, index string, sortOK bool, text string, args []any) {
			t.Helper()
			plan := explain(t, db, text, args)
			if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, index) || (!sortOK && analyzed && strings.Contains(plan, "Sort")) {
				t.Fatalf("%s (analyzed %v): the plan does not walk %s without a sort:\n%s", what, analyzed, index, plan)
			}
		}
		search := func(what, index string, cq store.CatalogQuery) {
			t.Helper()
			text, args := catalogSearchSQL(q, cq, store.DefaultCatalogLimit)
			check(what, index, false, text, args)
		}
		search("the first page", "catalog_started", store.CatalogQuery{})
		search("a page after a cursor", "catalog_started", store.CatalogQuery{After: cursor})
		search("a status's first page", "catalog_status", store.CatalogQuery{Status: store.CatalogFailed})
		search("a status's page after a cursor", "catalog_status", store.CatalogQuery{Status: store.CatalogFailed, After: cursor})
		search("a flow's first page", "catalog_workflow", store.CatalogQuery{WorkflowID: "wf-3"})
		search("a tenant's page after a cursor", "catalog_tenant", store.CatalogQuery{Tenant: "tenant-3", After: cursor})
		text, args := catalogSearchSQL(q, store.CatalogQuery{Prefix: "exec-0001"}, store.DefaultCatalogLimit)
		check("an id prefix", "catalog_pkey", true, text, args)
	}
}
