package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

func TestStorageCloseAndReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	st, err := Storage(StorageOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, st.Events, "exec-1", 0, batch("exec-1", 0, 5))
	if err := st.Snapshots.Save(ctx, store.Snapshot{ExecutionID: "exec-1", Sequence: 4, SchemaVersion: event.SchemaVersion, State: []byte{0, 1, 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Branches.CreateRef(ctx, "main", "exec-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Append":   st.Events.Append(ctx, "exec-1", 5, batch("exec-1", 5, 1)),
		"Save":     st.Snapshots.Save(ctx, store.Snapshot{ExecutionID: "exec-1", Sequence: 5}),
		"ReadFrom": func() error { _, err := st.Events.ReadFrom(ctx, "exec-1", 0); return err }(),
		"ReadRef":  func() error { _, err := st.Branches.ReadRef(ctx, "main"); return err }(),
	} {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", name, err)
		}
	}

	st, err = Storage(StorageOptions{Path: path, Synchronous: SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	if n := logLength(t, st.Events, "exec-1"); n != 5 {
		t.Fatalf("reopened log holds %d events, want 5", n)
	}
	snap, ok, err := st.Snapshots.LoadLatest(ctx, "exec-1")
	if err != nil || !ok || snap.Sequence != 4 || !bytes.Equal(snap.State, []byte{0, 1, 2}) {
		t.Fatalf("reopened snapshot %+v, %v, %v", snap, ok, err)
	}
	if ref, err := st.Branches.ReadRef(ctx, "main"); err != nil || ref.ExecutionID != "exec-1" {
		t.Fatalf("reopened ref %+v, %v", ref, err)
	}
	mustAppend(t, st.Events, "exec-1", 5, batch("exec-1", 5, 1))
}

func TestClosingAViewLeavesTheDBOpen(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	a, b := db.EventStore(), db.EventStore()
	mustAppend(t, a, "exec-v", 0, batch("exec-v", 0, 1))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close of a view: %v", err)
	}
	if err := a.Append(ctx, "exec-v", 1, batch("exec-v", 1, 1)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Append on a closed view = %v", err)
	}
	mustAppend(t, b, "exec-v", 1, batch("exec-v", 1, 1))
	if err := db.SnapshotStore().Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.BranchRegistry().CreateRef(ctx, "r", "exec-v"); err != nil {
		t.Fatal(err)
	}
}

// Appends already queued when Close starts are committed before it returns.
func TestCloseCommitsQueuedAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	db := openAt(t, path)
	s := db.EventStore()
	release := holdWriter(t, db)
	results := []<-chan error{
		appendAsync(context.Background(), s, "exec-q1", 0, batch("exec-q1", 0, 2)),
		appendAsync(context.Background(), s, "exec-q2", 0, batch("exec-q2", 0, 1)),
	}
	awaitQueued(db, 2)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, ch := range results {
		if err := <-ch; err != nil {
			t.Fatalf("queued append: %v", err)
		}
	}
	db = openAt(t, path)
	defer closeDB(t, db)
	if logLength(t, db.EventStore(), "exec-q1") != 2 || logLength(t, db.EventStore(), "exec-q2") != 1 {
		t.Fatal("queued appends did not survive Close")
	}
}

// Two DBs on one file (two processes, in effect) stay consistent: each
// writer's remembered log lengths are dropped once the other has committed,
// so a stale length is never trusted.
func TestTwoDBsOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b := openAt(t, path), openAt(t, path)
	defer closeDB(t, b)
	defer closeDB(t, a)
	sa, sb := a.EventStore(), b.EventStore()
	next := int64(0)
	for round := range 6 {
		w, other := sa, sb
		if round%2 == 1 {
			w, other = sb, sa
		}
		mustAppend(t, w, "exec-s", next, batch("exec-s", next, 2))
		next += 2
		// The other writer last saw the log shorter; it must not trust that.
		if err := other.Append(context.Background(), "exec-s", next-2, batch("exec-s", next-2, 1)); !isConflict(err) {
			t.Fatalf("round %d: stale append through the other DB = %v, want a conflict", round, err)
		}
	}
	if n := logLength(t, sa, "exec-s"); n != int(next) {
		t.Fatalf("log holds %d events, want %d", n, next)
	}
}

// Close racing with appenders: every Append that returned nil is in the
// file after a reopen, and every one that returned store.ErrClosed is not.
func TestCloseDuringAppendsKeepsExactlyTheAcknowledged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	db := openAt(t, path)
	s := db.EventStore()
	const appenders = 16
	var total atomic.Int64
	acked := make([]int64, appenders)
	closed := make(chan error, 1)
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exec := fmt.Sprintf("exec-%02d", w)
			for seq := int64(0); ; seq++ {
				err := s.Append(context.Background(), exec, seq, batch(exec, seq, 1))
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append(%s, %d): %v", exec, seq, err)
					return
				}
				acked[w]++
				if total.Add(1) == 300 {
					go func() { closed <- db.Close() }()
				}
			}
		}()
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	db = openAt(t, path)
	defer closeDB(t, db)
	for w := range appenders {
		exec := fmt.Sprintf("exec-%02d", w)
		if n := logLength(t, db.EventStore(), exec); int64(n) != acked[w] {
			t.Errorf("%s: %d events stored, %d acknowledged", exec, n, acked[w])
		}
	}
}

// A batch larger than one multi-row chunk, with rows big enough to force
// smaller chunks, reads back whole and in order.
func TestLargeBatchesSplitIntoChunks(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	evs := batch("exec-big", 0, 300)
	big := json.RawMessage(`"` + strings.Repeat("x", 300<<10) + `"`)
	for _, i := range []int{3, 4, 5, 6, 70, 199} {
		evs[i].Payload = big
	}
	mustAppend(t, s, "exec-big", 0, evs)
	got, err := s.ReadFrom(context.Background(), "exec-big", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("read %d events, want %d", len(got), len(evs))
	}
	for i := range evs {
		if got[i].Sequence != int64(i) || !bytes.Equal(got[i].Payload, evs[i].Payload) {
			t.Fatalf("event %d differs", i)
		}
	}
}

func TestChunkSizes(t *testing.T) {
	row := func(payload int) []any {
		return []any{"e", int64(0), "id", "wf", "T", int64(0), strings.Repeat("x", payload), nil}
	}
	rows := func(n, payload int) [][]any {
		out := make([][]any, n)
		for i := range out {
			out[i] = row(payload)
		}
		return out
	}
	for _, c := range []struct {
		rows [][]any
		want int
	}{
		{rows(1, 10), 0}, {rows(3, 10), 1}, {rows(64, 10), 6}, {rows(300, 10), 6},
		{rows(10, maxChunkBytes/4), 2}, {rows(2, maxChunkBytes), 0},
	} {
		if got := chunkLog2(c.rows); got != c.want {
			t.Errorf("chunkLog2(%d rows of %d bytes) = %d, want %d", len(c.rows), len(c.rows[0][6].(string)), got, c.want)
		}
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	if _, err := Open(""); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Open(\"\") = %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), WithSynchronous(Synchronous(7))); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Open with synchronous 7 = %v", err)
	}
}

func TestPragmasApplied(t *testing.T) {
	for _, c := range []struct {
		sync Synchronous
		want int64
	}{{SyncFull, 2}, {SyncNormal, 1}, {SyncExtra, 3}} {
		db := openTestDB(t, WithSynchronous(c.sync))
		var mode string
		var level int64
		err := db.w.run(context.Background(), func(rc *rawConn) error {
			row, _, err := rc.queryRow(`PRAGMA journal_mode`)
			if err == nil {
				mode = row[0].(string)
				level, _, err = rc.queryInt64(`PRAGMA synchronous`)
			}
			return err
		})
		if err != nil || mode != "wal" || level != c.want {
			t.Fatalf("%v: journal_mode %q synchronous %d (%v), want wal and %d", c.sync, mode, level, err, c.want)
		}
	}
}

func TestPathWithURICharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%d.db")
	db := openAt(t, path)
	mustAppend(t, db.EventStore(), "exec", 0, batch("exec", 0, 1))
	closeDB(t, db)
	db = openAt(t, path)
	defer closeDB(t, db)
	if n := logLength(t, db.EventStore(), "exec"); n != 1 {
		t.Fatalf("log holds %d events after reopening %q", n, path)
	}
}

// When another connection holds the write lock past busy_timeout, the whole
// group fails at BEGIN with the driver's error and nothing is written.
func TestWriteLockHeldElsewhereFailsTheGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locked.db")
	holder := openAt(t, path)
	defer closeDB(t, holder)
	db := openAt(t, path, WithBusyTimeout(20*time.Millisecond))
	defer closeDB(t, db)

	locked, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- holder.w.run(context.Background(), func(c *rawConn) error {
			return c.inTx(func() error {
				close(locked)
				<-release
				return nil
			})
		})
	}()
	<-locked
	err := db.EventStore().Append(context.Background(), "exec-l", 0, batch("exec-l", 0, 1))
	close(release)
	if err == nil || !strings.Contains(err.Error(), "begin") {
		t.Fatalf("Append under a held write lock = %v, want a begin failure", err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if n := logLength(t, db.EventStore(), "exec-l"); n != 0 {
		t.Fatalf("the failed append wrote %d events", n)
	}
	mustAppend(t, db.EventStore(), "exec-l", 0, batch("exec-l", 0, 1))
}
