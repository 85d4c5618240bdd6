package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/storetest"
)

// schemaBefore is the schema of the release before the migration named
// name: every migration up to, not including, it.
func schemaBefore(t *testing.T, name string) []migration {
	t.Helper()
	for i, m := range schemaMigrations {
		if m.name == name {
			return schemaMigrations[:i]
		}
	}
	t.Fatalf("no %q migration", name)
	return nil
}

// writeAsBefore creates the file at path with the schema of the release
// before the status index and writes logs the way that release did: the
// events rows and the executions row of each log, in one transaction, and
// nothing else. (Open cannot serve that schema: it prepares the index's
// reads.)
func writeAsBefore(t *testing.T, path string, logs map[string][]event.Envelope) {
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
	err = migrate(ctx, conn, schemaBefore(t, "status index"))
	if err == nil {
		err = conn.Raw(func(dc any) error {
			c, err := newRawConn(dc)
			if err != nil {
				return err
			}
			err = c.inTx(func() error {
				for id, evs := range logs {
					b, _ := newAppendBatch(id, 0, evs)
					if _, err := c.exec(sqlCreateLog, id, b.workflowID); err != nil {
						return err
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

// TestStatusIndexBackfill: a file written before the status index, with
// logs in every status, gets its index from the migration: exactly what
// the fold of each log calls for, and the same index appends through the
// new code keep for the same logs.
func TestStatusIndexBackfill(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		logs := storetest.StatusLogs(seed)
		path := filepath.Join(t.TempDir(), "old.db")
		writeAsBefore(t, path, logs)
		migrated := mustOpenEventStore(t, path)
		storetest.CheckUnfinished(t, migrated)
		kept := mustOpenEventStore(t, filepath.Join(t.TempDir(), "new.db"))
		storetest.AppendLogs(t, kept, logs, seed)
		if a, b := storetest.ListAllUnfinished(t, migrated), storetest.ListAllUnfinished(t, kept); !slices.Equal(a, b) {
			t.Fatalf("seed %d: the migrated index\n%+v\ndiffers from the one appends keep\n%+v", seed, a, b)
		}
		// The migrated index is kept by later writes like any other.
		mustAppend(t, migrated, "s-continued~1", 0, []event.Envelope{
			{ID: "x", WorkflowID: "wf", ExecutionID: "s-continued~1", Type: event.ExecutionStarted, Payload: json.RawMessage(`{}`)}})
		storetest.CheckUnfinished(t, migrated)
		for _, s := range []*EventStore{migrated, kept} {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestStatusIndexBackfillLogsSQLiteCannotParse: a CONTINUED whose metadata
// or payload is JSON SQLite's parser refuses (nested past its depth limit)
// is still listed by the migration — as continued to an unknown successor,
// never dropped.
func TestStatusIndexBackfillLogsSQLiteCannotParse(t *testing.T) {
	deep := json.RawMessage(strings.Repeat("[", 1500) + strings.Repeat("]", 1500))
	ev := func(exec string, seq int64, typ string) event.Envelope {
		return event.Envelope{ID: exec + "#" + string(rune('0'+seq)), WorkflowID: "wf", ExecutionID: exec,
			Type: typ, Sequence: seq, Timestamp: 10 + seq, Payload: json.RawMessage(`{}`)}
	}
	deepMeta := ev("deep-meta", 1, event.ExecutionContinued)
	deepMeta.Metadata = map[string]json.RawMessage{"trace": deep}
	deepPayload := ev("deep-payload", 1, event.ExecutionContinued)
	deepPayload.Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	deepPayload.Payload = json.RawMessage(`{"nextExecutionId":"succ","input":` + string(deep) + `}`)
	logs := map[string][]event.Envelope{
		"deep-meta":    {ev("deep-meta", 0, event.ExecutionStarted), deepMeta},
		"deep-payload": {ev("deep-payload", 0, event.ExecutionStarted), deepPayload},
	}
	path := filepath.Join(t.TempDir(), "old.db")
	writeAsBefore(t, path, logs)
	s := mustOpenEventStore(t, path)
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	got := storetest.ListAllUnfinished(t, s)
	want := []store.UnfinishedExecution{
		{ExecutionID: "deep-meta", WorkflowID: "wf", Status: store.UnfinishedContinued, Sequence: 1, Timestamp: 11},
		{ExecutionID: "deep-payload", WorkflowID: "wf", Status: store.UnfinishedContinued, Sequence: 1, Timestamp: 11},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListUnfinished = %+v, want %+v", got, want)
	}
}

// queryPlan returns the EXPLAIN QUERY PLAN details of q.
func queryPlan(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.read.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(errors.Join(err, rows.Close()))
		}
		plan = append(plan, detail)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// TestStatusIndexQueriesUseTheirIndexes: a page of ListUnfinished reads
// unfinished_listed in order (no sort, no scan of ended or handed-over
// rows), and a log's creation finds the continued rows waiting for it on
// unfinished_next.
func TestStatusIndexQueriesUseTheirIndexes(t *testing.T) {
	db := openTestDB(t)
	if plan := queryPlan(t, db, sqlListUnfinished, "", 10); !strings.Contains(plan, "unfinished_listed") ||
		strings.Contains(plan, "TEMP B-TREE") {
		t.Fatalf("ListUnfinished's plan is %q; want a search of unfinished_listed and no sort", plan)
	}
	if plan := queryPlan(t, db, sqlHandOver, "a", "a"); !strings.Contains(plan, "unfinished_next") {
		t.Fatalf("the hand-over's plan is %q; want a search of unfinished_next", plan)
	}
	if plan := queryPlan(t, db, sqlLastStatusEvent, "a", 5); !strings.Contains(plan, "PRIMARY KEY") && !strings.Contains(plan, "sqlite_autoindex_events") {
		t.Fatalf("the last status event's plan is %q; want a search of the events key", plan)
	}
}
