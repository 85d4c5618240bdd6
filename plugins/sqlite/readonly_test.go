package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/store"
)

// The read-only opener against the files a user actually has: a cleanly
// closed store, the files a writer killed with SIGKILL leaves (its -wal and
// -shm, or a hot rollback journal), older and newer schemas, and paths that
// are not stores at all. Every test compares the checksums of the database
// file and of every file beside it before and after reading.

// readAll reads every log of db through the read-only views, the way the
// CLI does: the listing, each log, its snapshots and the refs.
func readAll(t *testing.T, db *ReadOnlyDB) map[string][]event.Envelope {
	t.Helper()
	ctx := context.Background()
	events, snaps, refs := db.EventStore(), db.SnapshotStore(), db.BranchRegistry()
	logs := map[string][]event.Envelope{}
	page, err := events.ListExecutions(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range page.Executions {
		evs, err := events.ReadFrom(ctx, info.ExecutionID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.Sequence != int64(i) {
				t.Fatalf("%s: event %d has sequence %d", info.ExecutionID, i, e.Sequence)
			}
		}
		if int64(len(evs)) != info.Length {
			t.Fatalf("%s: %d events read, the listing says %d", info.ExecutionID, len(evs), info.Length)
		}
		if _, err := events.ReadRange(ctx, info.ExecutionID, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := snaps.LoadLatest(ctx, info.ExecutionID); err != nil {
			t.Fatal(err)
		}
		if _, err := snaps.ListSequences(ctx, info.ExecutionID); err != nil {
			t.Fatal(err)
		}
		logs[info.ExecutionID] = evs
	}
	if _, err := refs.ListRefs(ctx, ""); err != nil {
		t.Fatal(err)
	}
	return logs
}

// writeStore writes a closed store at path: two logs, a snapshot, a ref.
func writeStore(t *testing.T, path string, opts ...Option) {
	t.Helper()
	db, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mustAppend(t, db.EventStore(), "a", 0, batch("a", 0, 5))
	mustAppend(t, db.EventStore(), "b", 0, batch("b", 0, 3))
	if err := db.SnapshotStore().Save(ctx, store.Snapshot{ExecutionID: "a", Sequence: 2, SchemaVersion: event.SchemaVersion, State: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BranchRegistry().CreateRef(ctx, "main", "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func openRO(t *testing.T, path string) *ReadOnlyDB {
	t.Helper()
	db, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	return db
}

// TestReadOnlyCleanFile reads a cleanly closed store: immutable, nothing
// created (no -wal, no -shm), nothing changed, writes refused.
func TestReadOnlyCleanFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	writeStore(t, path)
	before := testbin.DirSums(t, dir)
	db := openRO(t, path)
	if db.Mode() != ReadFile {
		t.Fatalf("mode %s, want %s", db.Mode(), ReadFile)
	}
	logs := readAll(t, db)
	if len(logs["a"]) != 5 || len(logs["b"]) != 3 {
		t.Fatalf("read %d and %d events", len(logs["a"]), len(logs["b"]))
	}
	ctx := context.Background()
	if snap, ok, err := db.SnapshotStore().LoadAt(ctx, "a", 10); err != nil || !ok || snap.Sequence != 2 {
		t.Fatalf("snapshot: %+v %v %v", snap, ok, err)
	}
	if ref, err := db.BranchRegistry().ReadRef(ctx, "main"); err != nil || ref.ExecutionID != "a" {
		t.Fatalf("ref: %+v %v", ref, err)
	}
	if _, err := db.BranchRegistry().ReadRef(ctx, "none"); !errors.Is(err, store.ErrRefNotFound) {
		t.Fatalf("a missing ref: %v", err)
	}
	for prefix, want := range map[string]int{"": 1, "ma": 1, "main": 1, "mainx": 0, "x": 0} { //loom:order-independent each prefix is checked on its own
		if refs, err := db.BranchRegistry().ListRefs(ctx, prefix); err != nil || len(refs) != want {
			t.Errorf("ListRefs(%q): %v %v, want %d", prefix, refs, err, want)
		}
	}
	for name, err := range map[string]error{ //loom:order-independent each write is checked on its own
		"Append":    db.EventStore().Append(ctx, "c", 0, batch("c", 0, 1)),
		"Save":      db.SnapshotStore().Save(ctx, store.Snapshot{ExecutionID: "a", Sequence: 4, State: []byte(`{}`)}),
		"CreateRef": func() error { _, err := db.BranchRegistry().CreateRef(ctx, "x", "a"); return err }(),
		"MoveRef":   func() error { _, err := db.BranchRegistry().MoveRef(ctx, "main", "b", store.AnyVersion); return err }(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v", name, err)
		}
	}
	sub, err := db.EventStore().Subscribe(ctx, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{3, 4} {
		if e := <-sub.Events(); e.Sequence != want {
			t.Fatalf("subscription delivered #%d, want #%d", e.Sequence, want)
		}
	}
	sub.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EventStore().ReadFrom(ctx, "a", 0); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a read after Close: %v", err)
	}
	testbin.SameSums(t, "reading a clean store", before, testbin.DirSums(t, dir))
}

// The writer the crash tests kill: it appends one event per transaction to
// log "w" and says how many are committed after each, until it is killed.
// With LOOM_RO_PHASE=journal it switches the file to a rollback journal,
// commits some more, and then holds a transaction big enough to spill
// uncommitted pages into the database file.
func TestReadOnlyWriterHelper(t *testing.T) {
	path := os.Getenv("LOOM_RO_DB")
	if path == "" {
		return
	}
	switch os.Getenv("LOOM_RO_PHASE") {
	case "wal":
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s := db.EventStore()
		for seq := int64(0); ; seq++ {
			if err := s.Append(context.Background(), "w", seq, batch("w", seq, 1)); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("committed %d\n", seq+1)
		}
	case "journal":
		raw, err := sql.Open("sqlite", fileURI(path)+"?_pragma=journal_mode(DELETE)&_pragma=cache_size(2)")
		if err != nil {
			t.Fatal(err)
		}
		raw.SetMaxOpenConns(1)
		insert := `INSERT INTO events (execution_id, sequence, id, workflow_id, event_type, timestamp, payload) VALUES ('j', ?, ?, 'wf', 'TEST_EVENT', 1, ?)`
		if _, err := raw.Exec(`INSERT INTO executions (execution_id, workflow_id) VALUES ('j', 'wf')`); err != nil {
			t.Fatal(err)
		}
		for seq := range 3 {
			if _, err := raw.Exec(insert, seq, "j#"+strconv.Itoa(seq), `{"committed":true}`); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := raw.Begin()
		if err != nil {
			t.Fatal(err)
		}
		pad := `{"uncommitted":"` + strings.Repeat("u", 2000) + `"}`
		for seq := 3; seq < 2000; seq++ {
			if _, err := tx.Exec(insert, seq, "j#"+strconv.Itoa(seq), pad); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Println("spilled")
		time.Sleep(time.Hour)
	}
}

// killedWriter runs the writer helper in phase until it prints a line
// satisfying ready, kills it with SIGKILL and returns that line.
func killedWriter(t *testing.T, path, phase string, ready func(line string) bool) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyWriterHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOOM_RO_DB="+path, "LOOM_RO_PHASE="+phase)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	line := ""
	for sc.Scan() {
		if ready(sc.Text()) {
			line = sc.Text()
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: its exit status says so
	if line == "" {
		t.Fatalf("the writer ended before it was ready")
	}
	return line
}

// crashWAL leaves the files of a writer killed mid-append at path and
// returns how many appends it reported committed.
func crashWAL(t *testing.T, path string) int64 {
	t.Helper()
	line := killedWriter(t, path, "wal", func(l string) bool {
		n, err := strconv.ParseInt(strings.TrimPrefix(l, "committed "), 10, 64)
		return err == nil && n >= 40
	})
	n, _ := strconv.ParseInt(strings.TrimPrefix(line, "committed "), 10, 64)
	for _, s := range []string{"-wal", "-shm"} {
		if info, err := os.Stat(path + s); err != nil || info.Size() == 0 {
			t.Fatalf("the killed writer left no %s: %v", s, err)
		}
	}
	return n
}

// recovered reads log "w" the way a writer restarting would: from a copy
// opened read-write, which recovers the -wal.
func recovered(t *testing.T, path, id string) []event.Envelope {
	t.Helper()
	dir := t.TempDir()
	for _, s := range []string{"", "-wal", "-shm", "-journal"} {
		b, err := os.ReadFile(path + s)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "copy.db"+s), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(filepath.Join(dir, "copy.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	evs, err := db.EventStore().ReadFrom(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestReadOnlyCrashedWriterWAL reads the -wal a killed writer left: every
// committed append is read (they are only in the -wal: nothing was
// checkpointed), and the database file, the -wal and the -shm are byte for
// byte what the writer left.
func TestReadOnlyCrashedWriterWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	committed := crashWAL(t, path)
	before := testbin.DirSums(t, dir)
	db := openRO(t, path)
	if db.Mode() != ReadWAL {
		t.Fatalf("mode %s, want %s", db.Mode(), ReadWAL)
	}
	got := readAll(t, db)["w"]
	if int64(len(got)) < committed {
		t.Fatalf("read %d events; the writer had committed %d before it was killed", len(got), committed)
	}
	if want := recovered(t, path, "w"); len(got) != len(want) {
		t.Fatalf("read %d events, a recovering writer reads %d", len(got), len(want))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testbin.SameSums(t, "reading a crashed writer's WAL", before, testbin.DirSums(t, dir))
}

// TestReadOnlyCrashedWriterWALWithoutShm: a -wal without its -shm cannot
// be read without creating one, so a private copy is read instead; no -shm
// appears beside the store.
func TestReadOnlyCrashedWriterWALWithoutShm(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	committed := crashWAL(t, path)
	if err := os.Remove(path + "-shm"); err != nil {
		t.Fatal(err)
	}
	before := testbin.DirSums(t, dir)
	db := openRO(t, path)
	if db.Mode() != ReadSnapshot {
		t.Fatalf("mode %s, want %s", db.Mode(), ReadSnapshot)
	}
	if got := readAll(t, db)["w"]; int64(len(got)) < committed {
		t.Fatalf("read %d events; the writer had committed %d", len(got), committed)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testbin.SameSums(t, "reading a -wal without its -shm", before, testbin.DirSums(t, dir))
}

// TestReadOnlyHotJournal reads a file whose writer was killed in the middle
// of a rollback-journal transaction: the database file holds uncommitted
// pages and the journal the pages to put back. A read-only connection
// cannot play it back ("attempt to write a readonly database"), and an
// immutable one would read the uncommitted rows; the reader plays it back
// in a private copy and sees exactly the committed rows.
func TestReadOnlyHotJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	writeStore(t, path)
	killedWriter(t, path, "journal", func(l string) bool { return l == "spilled" })
	if hot, err := hasJournalHeader(path + "-journal"); err != nil || !hot {
		t.Fatalf("the killed writer left no hot journal: %v", err)
	}
	before := testbin.DirSums(t, dir)
	db := openRO(t, path)
	if db.Mode() != ReadSnapshot {
		t.Fatalf("mode %s, want %s", db.Mode(), ReadSnapshot)
	}
	logs := readAll(t, db)
	if len(logs["j"]) != 3 || len(logs["a"]) != 5 {
		t.Fatalf("read %d committed events of j (want 3) and %d of a (want 5)", len(logs["j"]), len(logs["a"]))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testbin.SameSums(t, "reading a hot journal", before, testbin.DirSums(t, dir))
}

// rawExec runs statements on path through a plain read-write connection:
// how the tests make files of other schema versions.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyOlderSchema reads a file of the first schema version (the
// event log only: no snapshots, no refs) without migrating it: it stays at
// version 1.
func TestReadOnlyOlderSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	writeStore(t, path)
	// Back to version 1: its tables only, and its ledger row.
	var drops []string
	for _, m := range schemaMigrations[1:] {
		for _, q := range m.stmts {
			if f := strings.Fields(q); len(f) > 2 && f[0] == "CREATE" && f[1] == "TABLE" {
				drops = append(drops, "DROP TABLE "+f[2])
			}
		}
	}
	rawExec(t, path, append(drops, "DELETE FROM schema_migrations WHERE version > 1")...)
	before := testbin.DirSums(t, dir)
	db := openRO(t, path)
	if s := db.Schema(); s.Found != 1 || s.Known != len(schemaMigrations) {
		t.Fatalf("schema %+v", s)
	}
	if got := readAll(t, db)["a"]; len(got) != 5 {
		t.Fatalf("read %d events of an old file", len(got))
	}
	ctx := context.Background()
	if _, ok, err := db.SnapshotStore().LoadLatest(ctx, "a"); ok || err != nil {
		t.Fatalf("a file without snapshots: %v %v", ok, err)
	}
	if _, err := db.BranchRegistry().ReadRef(ctx, "main"); !errors.Is(err, store.ErrRefNotFound) {
		t.Fatalf("a file without refs: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testbin.SameSums(t, "reading an older schema", before, testbin.DirSums(t, dir))
}

// TestReadOnlyNewerSchema reads a newer release's file when what this code
// reads is still there, and refuses it, with ErrSchemaTooNew, when it is
// not.
func TestReadOnlyNewerSchema(t *testing.T) {
	next := len(schemaMigrations) + 1
	for _, tc := range []struct {
		name     string
		stmt     string
		readable bool
	}{
		{"an added table", `CREATE TABLE future (x INTEGER)`, true},
		{"a renamed column", `ALTER TABLE events RENAME COLUMN payload TO body`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "new.db")
			writeStore(t, path)
			rawExec(t, path, tc.stmt, fmt.Sprintf(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (%d, 'future', 0)`, next))
			before := testbin.DirSums(t, dir)
			db, err := OpenReadOnly(path)
			if !tc.readable {
				var sv *SchemaVersionError
				if !errors.Is(err, ErrSchemaTooNew) || !errors.As(err, &sv) || sv.Found != next {
					t.Fatalf("an unreadable newer schema: %v", err)
				}
				testbin.SameSums(t, "refusing a newer schema", before, testbin.DirSums(t, dir))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := db.Schema(); s.Found != next {
				t.Fatalf("schema %+v", s)
			}
			if got := readAll(t, db)["a"]; len(got) != 5 {
				t.Fatalf("read %d events", len(got))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			testbin.SameSums(t, "reading a newer schema", before, testbin.DirSums(t, dir))
		})
	}
}

// TestReadOnlyRefusesWhatIsNotAStore: a named pipe (at once: nothing opens
// it), a directory, a missing file, text, a SQLite file of another program,
// and a store whose -wal is a named pipe.
func TestReadOnlyRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text.db")
	if err := os.WriteFile(text, []byte("not a database, just words"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	raw, err := sql.Open("sqlite", fileURI(other))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE notes (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(dir, "sidecar.db")
	writeStore(t, sidecar)
	if err := syscall.Mkfifo(sidecar+"-wal", 0o600); err != nil {
		t.Fatal(err)
	}
	before := testbin.DirSums(t, dir)
	for _, tc := range []struct {
		path, says string
		notExist   bool
	}{
		{fifo, "is a named pipe (FIFO), not a database file", false},
		{dir, "is a directory", false},
		{filepath.Join(dir, "missing.db"), "no store at", true},
		{text, "is not a SQLite file Loom can read", false},
		{other, "without a Loom store in it", false},
		{sidecar, "has a -wal that is a named pipe (FIFO)", false},
	} {
		done := make(chan error, 1)
		go func() {
			db, err := OpenReadOnly(tc.path)
			if err == nil {
				err = errors.Join(errors.New("opened"), db.Close())
			}
			done <- err
		}()
		select {
		case err := <-done:
			if tc.notExist != errors.Is(err, fs.ErrNotExist) || (!tc.notExist && !errors.Is(err, ErrNotAStore)) ||
				!strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: %v; want an error saying %q", filepath.Base(tc.path), err, tc.says)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OpenReadOnly(%s) blocks", filepath.Base(tc.path))
		}
	}
	testbin.SameSums(t, "refusing", before, testbin.DirSums(t, dir))
}

// TestReadOnlyFollowsWriters follows a log while writers come and go: the
// file starts closed (immutable), a writer appends (the reader moves to its
// -wal), closes (back to the file), and another appends again; the
// subscription sees every event once, in order.
func TestReadOnlyFollowsWriters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loom.db")
	writeStore(t, path)
	db := openRO(t, path)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := db.EventStore().Subscribe(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	next := int64(0)
	expect := func(upTo int64) {
		// The files are looked at again at most once per poll interval.
		t.Helper()
		for ; next < upTo; next++ {
			select {
			case e, ok := <-sub.Events():
				if !ok {
					t.Fatalf("the subscription ended at #%d: %v", next, sub.Err())
				}
				if e.Sequence != next {
					t.Fatalf("delivered #%d, want #%d", e.Sequence, next)
				}
			case <-ctx.Done():
				t.Fatalf("no #%d (mode %s)", next, db.Mode())
			}
		}
	}
	expect(5)
	for round := range 3 {
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		from := int64(5 + 3*round)
		mustAppend(t, w.EventStore(), "a", from, batch("a", from, 3))
		if round == 0 {
			expect(from + 3) // seen through the live writer's -wal
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// Closed at once: the reader may never have seen the -wal, only a
		// database file that changed under its immutable connection.
		expect(from + 3)
		evs, err := db.EventStore().ReadFrom(ctx, "a", 0)
		if err != nil || int64(len(evs)) != from+3 {
			t.Fatalf("a read after the writer closed: %d events, %v", len(evs), err)
		}
	}
}
