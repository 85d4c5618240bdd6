package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// trimmedLogOf is the log of exec after a trim through 4 of batch(exec, 0, 10).
func trimmedLogOf(exec string) []event.Envelope {
	return append(batch(exec, 0, 1), batch(exec, 5, 5)...)
}

func sameLog(t *testing.T, what string, got, want []event.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !store.SameArchived(got[i], want[i]) {
			t.Fatalf("%s: event %d is #%d %s, want #%d %s", what, i, got[i].Sequence, got[i].ID, want[i].Sequence, want[i].ID)
		}
	}
}

// TestCompactionMigrationOfAnOlderFile: a file of the release before
// compaction (schema version 8, made here by undoing migrations 9 to 11) reads as untrimmed with an empty archive,
// read-only and unmigrated; opened by this code it gets migrations 9 to 11, and its
// old log is trimmed, archived and appended to like a new one.
func TestCompactionMigrationOfAnOlderFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old := openAt(t, path)
	mustAppend(t, old.EventStore(), "x", 0, batch("x", 0, 10))
	closeDB(t, old)
	// Back to version 8: without the archive table, the trim points, the
	// read models and the catalog.
	rawExec(t, path, `DROP TABLE archive`, `ALTER TABLE executions DROP COLUMN trimmed`,
		`DROP TABLE read_models`, `DROP TABLE read_model_fields`, `DROP TABLE read_model_watermarks`,
		`DROP TABLE catalog`, `DELETE FROM schema_migrations WHERE version > 8`)

	ro := openRO(t, path)
	if got, err := ro.EventStore().TrimmedThrough(ctx, "x"); err != nil || got != 0 {
		t.Fatalf("read-only TrimmedThrough of a file without trim points: %d %v", got, err)
	}
	if got, err := ro.ArchiveStore().ReadArchived(ctx, "x", 0, -1); err != nil || len(got) != 0 {
		t.Fatalf("read-only ReadArchived of a file without an archive: %d events, %v", len(got), err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	db := openAt(t, path)
	defer closeDB(t, db)
	if got := ledger(t, db); len(got) != len(schemaMigrations) || got[len(got)-1] != len(schemaMigrations) {
		t.Fatalf("schema_migrations after the upgrade: %v", got)
	}
	s, a := db.EventStore(), db.ArchiveStore()
	if got, err := s.TrimmedThrough(ctx, "x"); err != nil || got != 0 {
		t.Fatalf("TrimmedThrough of an old log: %d %v", got, err)
	}
	if err := a.Archive(ctx, "x", batch("x", 1, 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimThrough(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, "the old log trimmed", got, trimmedLogOf("x"))
	mustAppend(t, s, "x", 10, batch("x", 10, 1)) // a fresh writer reads the length from the log
	if archived, err := a.ReadArchived(ctx, "x", 0, -1); err != nil {
		t.Fatal(err)
	} else {
		sameLog(t, "the archive", archived, batch("x", 1, 4))
	}
}

// TestReadOnlyReadsATrimmedLog: the read-only opener reads a trimmed log as
// the writer does (its start and its tail, its length unchanged), reports
// its trim point and its archive, and refuses to trim or archive.
func TestReadOnlyReadsATrimmedLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	db := openAt(t, path)
	mustAppend(t, db.EventStore(), "x", 0, batch("x", 0, 10))
	if err := db.ArchiveStore().Archive(ctx, "x", batch("x", 1, 4)); err != nil {
		t.Fatal(err)
	}
	if err := db.EventStore().TrimThrough(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	closeDB(t, db)

	ro := openRO(t, path)
	defer func() {
		if err := ro.Close(); err != nil {
			t.Error(err)
		}
	}()
	s, a := ro.EventStore(), ro.ArchiveStore()
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, "ReadFrom", got, trimmedLogOf("x"))
	if got, err = s.ReadRange(ctx, "x", 2, 7); err != nil {
		t.Fatal(err)
	}
	sameLog(t, "ReadRange [2,7)", got, batch("x", 5, 2))
	if through, err := s.TrimmedThrough(ctx, "x"); err != nil || through != 4 {
		t.Fatalf("TrimmedThrough: %d %v", through, err)
	}
	if through, err := s.TrimmedThrough(ctx, "unknown"); err != nil || through != 0 {
		t.Fatalf("TrimmedThrough of an unknown execution: %d %v", through, err)
	}
	page, err := s.ListExecutions(ctx, "", 10)
	if err != nil || len(page.Executions) != 1 || page.Executions[0].Length != 10 {
		t.Fatalf("listing: %+v %v", page, err)
	}
	archived, err := a.ReadArchived(ctx, "x", 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, "ReadArchived [2,end)", archived, batch("x", 2, 3))
	if err := s.TrimThrough(ctx, "x", 6); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("TrimThrough of a read-only store: %v", err)
	}
	if err := a.Archive(ctx, "x", batch("x", 5, 1)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Archive of a read-only store: %v", err)
	}
}

// TestDeleteExecutionForgetsTheTrimPoint: a deleted log starts again
// untrimmed, and a fork through 0 of a trimmed log is not trimmed.
func TestDeleteExecutionForgetsTheTrimPoint(t *testing.T) {
	ctx := context.Background()
	s := openTestDB(t).EventStore()
	mustAppend(t, s, "x", 0, batch("x", 0, 10))
	if err := s.TrimThrough(ctx, "x", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyPrefix(ctx, "x", "start", 0); err != nil {
		t.Fatal(err)
	}
	if through, err := s.TrimmedThrough(ctx, "start"); err != nil || through != 0 {
		t.Fatalf("the trim point of a copy of #0 only: %d %v", through, err)
	}
	if err := s.DeleteExecution(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if through, err := s.TrimmedThrough(ctx, "x"); err != nil || through != 0 {
		t.Fatalf("the trim point of a deleted log: %d %v", through, err)
	}
	mustAppend(t, s, "x", 0, batch("x", 0, 3))
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, "the log recreated", got, batch("x", 0, 3))
}
