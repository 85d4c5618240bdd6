package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// writeBeforeCatalog creates the file at path with the schema of the
// release before the catalog and writes logs the way that release did: the
// events rows, the executions row and the status index entry of each log,
// in one transaction. (Open cannot write that schema: its appends keep the
// catalog.)
func writeBeforeCatalog(t *testing.T, path string, logs map[string][]event.Envelope) {
	t.Helper()
	ctx := context.Background()
	pool, err := openPool(writerDSN(path, defaultOptions()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Conn(ctx)
	if err != nil {
		t.Fatal(errors.Join(err, pool.Close()))
	}
	err = migrate(ctx, conn, schemaBefore(t, "execution catalog"))
	if err == nil {
		err = conn.Raw(func(dc any) error {
			c, err := newRawConn(dc)
			if err != nil {
				return err
			}
			err = c.inTx(func() error {
				for _, id := range slices.Sorted(maps.Keys(logs)) {
					b, _ := newAppendBatch(id, 0, logs[id])
					if _, err := c.exec(sqlCreateLog, id, b.workflowID); err != nil {
						return err
					}
					if b.indexed {
						if err := indexChange(c, id, true, b.status); err != nil {
							return err
						}
					}
					if err := insertEvents(c, []*appendBatch{b}); err != nil {
						return err
					}
				}
				return nil
			})
			return errors.Join(err, c.close())
		})
	}
	if err := errors.Join(err, conn.Close(), pool.Close()); err != nil {
		t.Fatalf("write the logs as the old release did: %v", err)
	}
}

// TestCatalogBackfill: a file written before the catalog, with logs of
// every status, tenant principals of every shape and an unstamped
// CONTINUED, gets its catalog from the migration: exactly what the kit's
// rule gives each log, and the same catalog appends through the new code
// keep for the same logs; later writes keep it like any other.
func TestCatalogBackfill(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		logs := storetest.CatalogLogs(seed)
		path := filepath.Join(t.TempDir(), "old.db")
		writeBeforeCatalog(t, path, logs)
		migrated := mustOpenEventStore(t, path)
		storetest.CheckCatalogSearches(t, migrated, logs)
		kept := mustOpenEventStore(t, filepath.Join(t.TempDir(), "new.db"))
		storetest.AppendLogs(t, kept, logs, seed)
		storetest.CheckCatalogSearches(t, kept, logs)

		done := event.Envelope{ID: "t-acme#2", WorkflowID: "wf-tenants", ExecutionID: "t-acme", Type: event.ExecutionCompleted,
			Sequence: 2, Timestamp: logs["t-acme"][1].Timestamp + 1, Payload: json.RawMessage(`{}`)}
		logs["t-acme"] = append(logs["t-acme"], done)
		for _, s := range []*EventStore{migrated, kept} {
			mustAppend(t, s, "t-acme", 2, []event.Envelope{done})
			storetest.CheckCatalogSearches(t, s, logs)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCatalogBackfillContinuedSQLiteCannotParse: a CONTINUED whose metadata
// SQLite's parser refuses (nested past its depth limit) is decided exactly
// by the migration's Go step: continued when kernel-stamped, else the
// status of the event before it, or pending.
func TestCatalogBackfillContinuedSQLiteCannotParse(t *testing.T) {
	deep := json.RawMessage(strings.Repeat("[", 1500) + strings.Repeat("]", 1500))
	ev := func(exec string, seq int64, typ string, meta map[string]json.RawMessage) event.Envelope {
		return event.Envelope{ID: fmt.Sprintf("%s#%d", exec, seq), WorkflowID: "wf", ExecutionID: exec,
			Type: typ, Sequence: seq, Timestamp: 10 + seq, Payload: json.RawMessage(`{"nextExecutionId":"succ"}`), Metadata: meta}
	}
	stamped := map[string]json.RawMessage{"kernel": json.RawMessage(`true`), "trace": deep}
	unstamped := map[string]json.RawMessage{"trace": deep}
	logs := map[string][]event.Envelope{
		"deep-stamped": {ev("deep-stamped", 0, event.ExecutionStarted, nil), ev("deep-stamped", 1, event.ExecutionSuspended, nil),
			ev("deep-stamped", 2, event.ExecutionContinued, stamped)},
		"deep-unstamped": {ev("deep-unstamped", 0, event.ExecutionStarted, nil), ev("deep-unstamped", 1, event.ExecutionSuspended, nil),
			ev("deep-unstamped", 2, event.ExecutionContinued, unstamped)},
		"deep-pending": {ev("deep-pending", 0, "STEP_DONE", nil), ev("deep-pending", 1, event.ExecutionContinued, unstamped)},
	}
	path := filepath.Join(t.TempDir(), "old.db")
	writeBeforeCatalog(t, path, logs)
	s := mustOpenEventStore(t, path)
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	want := []store.CatalogEntry{
		{ExecutionID: "deep-pending", WorkflowID: "wf", Status: store.CatalogPending, StartedAt: 10, StatusAt: 10},
		{ExecutionID: "deep-stamped", WorkflowID: "wf", Status: store.CatalogContinued, StartedAt: 10, StatusAt: 12},
		{ExecutionID: "deep-unstamped", WorkflowID: "wf", Status: store.CatalogSuspended, StartedAt: 10, StatusAt: 11},
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
	path := filepath.Join(t.TempDir(), "loom.db")
	closeDB(t, openAt(t, path))
	rawExec(t, path, `CREATE TABLE catalog_writes (execution_id TEXT NOT NULL)`,
		`CREATE TRIGGER catalog_updated AFTER UPDATE ON catalog BEGIN INSERT INTO catalog_writes VALUES (new.execution_id); END`)
	db := openAt(t, path)
	defer closeDB(t, db)
	s := db.EventStore()
	evs := batch("x", 0, 6)
	evs[0].Type = event.ExecutionStarted
	evs[4].Type = event.ExecutionSuspended
	mustAppend(t, s, "x", 0, evs[:1])
	mustAppend(t, s, "x", 1, evs[1:2])
	mustAppend(t, s, "x", 2, evs[2:4])
	if n := countRows(t, db, "catalog_writes"); n != 0 {
		t.Fatalf("step batches wrote the catalog row %d times", n)
	}
	mustAppend(t, s, "x", 4, evs[4:])
	if n := countRows(t, db, "catalog_writes"); n != 1 {
		t.Fatalf("a batch that suspends wrote the catalog row %d times, want once", n)
	}
}

// assertPlan fails t unless the plan of the catalog statement text walks
// index (a search of it, or an ordered walk stopped by the LIMIT), never
// scans the table, and needs no sort unless sortOK.
func assertPlan(t *testing.T, db *DB, what, index string, sortOK bool, text string, args []any) {
	t.Helper()
	plan := queryPlan(t, db, text, args...)
	for _, step := range strings.Split(plan, "; ") {
		if strings.HasPrefix(step, "SCAN catalog") && !strings.Contains(step, "USING") {
			t.Fatalf("%s: the plan %q scans the table", what, plan)
		}
	}
	if !strings.Contains(plan, index) || (!sortOK && strings.Contains(plan, "TEMP B-TREE")) {
		t.Fatalf("%s: the plan is %q; want a walk of %s and no sort", what, plan, index)
	}
}

// TestCatalogQueriesUseTheirIndexes: at 20,000 executions, the first page
// and a page after a cursor, unfiltered or filtered by status, flow or
// tenant, walk the index of the search's order or of its filter and need
// no sort; an id prefix is a range of the primary key; a count reads the
// status index alone. Checked before and after ANALYZE (Loom never runs
// it, a user may).
func TestCatalogQueriesUseTheirIndexes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	closeDB(t, openAt(t, path))
	// The rows go in before the migration's indexes are built again: one
	// sort per index, not 20,000 inserts into each. (SQLite's planner
	// reads no row counts until ANALYZE, and after it 20,000 rows make it
	// choose as 100,000 do; bench workload h times the pages at 100,000.)
	var drops, creates []string
	for _, m := range schemaMigrations {
		for _, q := range m.stmts {
			if f := strings.Fields(q); len(f) > 4 && f[0] == "CREATE" && f[1] == "INDEX" && f[4] == "catalog" {
				drops, creates = append(drops, "DROP INDEX "+f[2]), append(creates, q)
			}
		}
	}
	if len(creates) != 4 {
		t.Fatalf("the migrations create %d indexes on catalog, want 4", len(creates))
	}
	rawExec(t, path, append(append(drops, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
		INSERT INTO catalog SELECT printf('exec-%06d', i), printf('wf-%d', i % 10), printf('tenant-%d', i % 50),
			CASE i % 7 WHEN 0 THEN 'pending' WHEN 1 THEN 'running' WHEN 2 THEN 'suspended' WHEN 3 THEN 'completed'
				WHEN 4 THEN 'failed' WHEN 5 THEN 'cancelled' ELSE 'continued' END,
			1000000 + i / 3, 1000000 + i FROM n`), creates...)...)
	cursor := "1004000:exec-012001"
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			rawExec(t, path, `ANALYZE`)
		}
		db := openAt(t, path)
		search := func(what, index string, q store.CatalogQuery) {
			t.Helper()
			text, args := catalogSearchSQL(q, store.DefaultCatalogLimit)
			assertPlan(t, db, fmt.Sprintf("%s (analyzed %v)", what, analyzed), index, false, text, args)
		}
		search("the first page", "catalog_started", store.CatalogQuery{})
		search("a page after a cursor", "catalog_started", store.CatalogQuery{After: cursor})
		search("a status's first page", "catalog_status", store.CatalogQuery{Status: store.CatalogFailed})
		search("a status's page after a cursor", "catalog_status", store.CatalogQuery{Status: store.CatalogFailed, After: cursor})
		search("a flow's first page", "catalog_workflow", store.CatalogQuery{WorkflowID: "wf-3"})
		search("a tenant's page after a cursor", "catalog_tenant", store.CatalogQuery{Tenant: "tenant-3", After: cursor})
		text, args := catalogSearchSQL(store.CatalogQuery{Prefix: "exec-0001"}, store.DefaultCatalogLimit)
		assertPlan(t, db, "an id prefix", "PRIMARY KEY", true, text, args)
		text, args = catalogCountSQL(store.CatalogQuery{})
		assertPlan(t, db, "the count", "COVERING INDEX catalog_status", false, text, args)
		closeDB(t, db)
	}
}

// TestReadOnlyCatalog: a read-only opening searches and counts the file's
// catalog as the writer does, refuses a malformed query and, once closed,
// every call; a file written before the catalog is refused with
// ErrNoCatalog, not read as an empty catalog.
func TestReadOnlyCatalog(t *testing.T) {
	ctx := context.Background()
	logs := storetest.CatalogLogs(1)
	path := filepath.Join(t.TempDir(), "loom.db")
	w := mustOpenEventStore(t, path)
	storetest.AppendLogs(t, w, logs, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openRO(t, path)
	storetest.CheckCatalogSearches(t, ro.EventStore(), logs)
	var bad *store.InvalidCatalogQueryError
	if _, err := ro.EventStore().SearchExecutions(ctx, store.CatalogQuery{Status: "done"}); !errors.As(err, &bad) {
		t.Fatalf("a malformed search: %v, want *store.InvalidCatalogQueryError", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.EventStore().SearchExecutions(ctx, store.CatalogQuery{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("SearchExecutions after Close: %v, want store.ErrClosed", err)
	}
	if _, err := ro.EventStore().CountExecutions(ctx, store.CatalogQuery{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("CountExecutions after Close: %v, want store.ErrClosed", err)
	}

	old := filepath.Join(t.TempDir(), "old.db")
	writeBeforeCatalog(t, old, logs)
	ro = openRO(t, old)
	defer func() {
		if err := ro.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := ro.EventStore().SearchExecutions(ctx, store.CatalogQuery{}); !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("SearchExecutions of a file without a catalog: %v, want ErrNoCatalog", err)
	}
	if _, err := ro.EventStore().CountExecutions(ctx, store.CatalogQuery{}); !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("CountExecutions of a file without a catalog: %v, want ErrNoCatalog", err)
	}
	if s := ro.Schema(); s.Found != len(schemaBefore(t, "execution catalog")) {
		t.Fatalf("the read-only opening migrated the file: %+v", s)
	}
}
