package postgres

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// migratedFrom writes logs into a new schema at the release before the
// status index, then opens it with the current code (which migrates it)
// and returns its event store.
func migratedFrom(t *testing.T, logs map[string][]event.Envelope) *EventStore {
	t.Helper()
	schema := newSchema(t)
	old := openDB(t, schema, func(o *Options) { o.migrations = schemaBefore(t, "status index") })
	writeAsBefore(t, old, logs)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	return openDB(t, schema).EventStore()
}

// TestStatusIndexBackfill: a schema written before the status index, with
// logs in every status, gets its index from the migration: exactly what
// the fold of each log calls for, and the same index appends through the
// new code keep for the same logs.
func TestStatusIndexBackfill(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		logs := storetest.StatusLogs(seed)
		migrated := migratedFrom(t, logs)
		storetest.CheckUnfinished(t, migrated)
		kept := openTestDB(t).EventStore()
		storetest.AppendLogs(t, kept, logs, seed)
		if a, b := storetest.ListAllUnfinished(t, migrated), storetest.ListAllUnfinished(t, kept); !slices.Equal(a, b) {
			t.Fatalf("seed %d: the migrated index\n%+v\ndiffers from the one appends keep\n%+v", seed, a, b)
		}
		// The migrated index is kept by later writes like any other.
		mustAppend(t, migrated, "s-continued~1", 0, []event.Envelope{
			{ID: "x", WorkflowID: "wf", ExecutionID: "s-continued~1", Type: event.ExecutionStarted, Payload: json.RawMessage(`{}`)}})
		storetest.CheckUnfinished(t, migrated)
	}
}

// TestStatusIndexBackfillLogsPostgresCannotParse: a CONTINUED whose
// metadata or payload holds an escape PostgreSQL's json refuses to
// de-escape (\u0000, a lone surrogate) neither fails the migration nor is
// dropped: it is listed as continued to an unknown successor. One with
// harmless escapes is read exactly.
func TestStatusIndexBackfillLogsPostgresCannotParse(t *testing.T) {
	t.Parallel()
	ev := func(exec string, seq int64, typ, payload string, meta map[string]json.RawMessage) event.Envelope {
		return event.Envelope{ID: exec + "#" + string(rune('0'+seq)), WorkflowID: "wf", ExecutionID: exec,
			Type: typ, Sequence: seq, Timestamp: 10 + seq, Payload: json.RawMessage(payload), Metadata: meta}
	}
	kernel := map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	nul := map[string]json.RawMessage{"trace": json.RawMessage(`{"\u0000":1}`)}
	logs := map[string][]event.Envelope{
		"nul-meta": {ev("nul-meta", 0, event.ExecutionStarted, `{}`, nil),
			ev("nul-meta", 1, event.ExecutionContinued, `{}`, nul)},
		"nul-payload": {ev("nul-payload", 0, event.ExecutionStarted, `{}`, nil),
			ev("nul-payload", 1, event.ExecutionContinued, `{"nextExecutionId":"succ","input":{"\u0000":"\ud800"}}`, kernel)},
		"escaped": {ev("escaped", 0, event.ExecutionStarted, `{}`, nil),
			ev("escaped", 1, event.ExecutionContinued, `{"input":"\u00e9<>","nextExecutionId":"succ-\u00e9"}`, kernel)},
	}
	s := migratedFrom(t, logs)
	got := storetest.ListAllUnfinished(t, s)
	want := []store.UnfinishedExecution{
		{ExecutionID: "escaped", WorkflowID: "wf", Status: store.UnfinishedContinued, Sequence: 1, Timestamp: 11, NextExecutionID: "succ-é"},
		{ExecutionID: "nul-meta", WorkflowID: "wf", Status: store.UnfinishedContinued, Sequence: 1, Timestamp: 11},
		{ExecutionID: "nul-payload", WorkflowID: "wf", Status: store.UnfinishedContinued, Sequence: 1, Timestamp: 11},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListUnfinished = %+v, want %+v", got, want)
	}
	if err := s.AppendFenced(context.Background(), "succ-é", unfenced, 0, batch("succ-é", 0, 1)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range storetest.ListAllUnfinished(t, s) {
		ids = append(ids, u.ExecutionID)
	}
	if want := []string{"nul-meta", "nul-payload", "succ-é"}; !slices.Equal(ids, want) {
		t.Fatalf("after the successor's first append the index lists %q, want %q (escaped handed over)", ids, want)
	}
}

// TestStatusIndexContinueRacesSuccessorDelete: an append that continues
// to a successor whose DeleteExecution is in flight waits for it (the
// successor's row is share-locked), then sees the log gone and lists the
// continued execution: the race never leaves it unlisted with no
// successor to hand over to.
func TestStatusIndexContinueRacesSuccessorDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	db := openDB(t, schema)
	s := db.EventStore()
	mustAppend(t, s, "succ", 0, batch("succ", 0, 1))
	mustAppend(t, s, "pred", 0, batch("pred", 0, 1))

	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{db.q.deleteLog, db.q.deleteEvents, db.q.endUnfinished, db.q.takeAgain} {
		if _, err := tx.Exec(ctx, q, "succ"); err != nil {
			t.Fatal(err)
		}
	}
	cont := batch("pred", 1, 1)
	cont[0].Type = event.ExecutionContinued
	cont[0].Payload = json.RawMessage(`{"nextExecutionId":"succ"}`)
	cont[0].Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	appended := make(chan error, 1)
	go func() { appended <- s.Append(ctx, "pred", 1, cont) }()

	// The append waits for the delete's lock on the successor's row.
	deadline := time.Now().Add(10 * time.Second)
	for adminQueryInt(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
		AND position($1 in query) > 0`, quoted(schema)+".unfinished") == 0 {
		select {
		case err := <-appended:
			t.Fatalf("the append finished (%v) while the successor's delete was in flight", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the append never waited for the successor's delete")
		}
		runtime.Gosched()
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	got := storetest.ListAllUnfinished(t, s)
	if len(got) != 1 || got[0].ExecutionID != "pred" || got[0].Status != store.UnfinishedContinued || got[0].NextExecutionID != "succ" {
		t.Fatalf("ListUnfinished = %+v, want pred continued to succ", got)
	}
}
