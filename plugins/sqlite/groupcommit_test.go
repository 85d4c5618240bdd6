package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// holdWriter parks a leader inside an op until the returned release is
// called, so a test can queue requests and know the next leader will drain
// them as one group. It returns once the leader is parked.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	parked, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.w.run(context.Background(), func(*rawConn) error {
			close(parked)
			<-gate
			return nil
		})
	}()
	<-parked
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(gate)
			if err := <-done; err != nil {
				t.Errorf("held op: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// awaitQueued spins until n requests wait in the writer's queue. The
// leadership is held, so the count only grows; no clock is involved.
func awaitQueued(db *DB, n int) {
	for len(db.w.queue) < n {
		runtime.Gosched()
	}
}

// appendAsync starts an Append and returns its result channel.
func appendAsync(ctx context.Context, s *EventStore, exec string, expected int64, evs []event.Envelope) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Append(ctx, exec, expected, evs) }()
	return ch
}

func TestGroupCommitDrainsQueueIntoOneTransaction(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	release := holdWriter(t, db)
	const n = 32
	results := make([]<-chan error, n)
	for i := range results {
		exec := fmt.Sprintf("exec-%02d", i)
		results[i] = appendAsync(context.Background(), s, exec, 0, batch(exec, 0, 1+i%3))
	}
	awaitQueued(db, n)
	before := db.WriteStats()
	release()
	for i, ch := range results {
		if err := <-ch; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got := db.WriteStats()
	if txs, batches := got.Transactions-before.Transactions, got.Batches-before.Batches; txs != 1 || batches != n {
		t.Fatalf("%d queued appends committed in %d transactions as %d batches, want 1 and %d", n, txs, batches, n)
	}
	for i := range n {
		exec := fmt.Sprintf("exec-%02d", i)
		if l := logLength(t, s, exec); l != 1+i%3 {
			t.Fatalf("log of %s holds %d events, want %d", exec, l, 1+i%3)
		}
	}
}

func TestGroupCommitGroupsFreeRunningAppenders(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	const appenders, appends = 32, 50
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exec := fmt.Sprintf("exec-%02d", w)
			for seq := range int64(appends) {
				if err := s.Append(context.Background(), exec, seq, batch(exec, seq, 1)); err != nil {
					t.Errorf("Append(%s, %d): %v", exec, seq, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := db.WriteStats()
	if st.Batches != appenders*appends || st.Events != appenders*appends {
		t.Fatalf("stats %+v, want %d batches and events", st, appenders*appends)
	}
	// While the writer commits one group the other appenders queue the next,
	// so batches outnumber transactions.
	if st.Transactions >= st.Batches {
		t.Fatalf("%d batches took %d transactions: no grouping", st.Batches, st.Transactions)
	}
	t.Logf("%d batches in %d transactions (%.1f per commit)", st.Batches, st.Transactions,
		float64(st.Batches)/float64(st.Transactions))
}

func TestGroupCommitRefusalsDoNotFailNeighbours(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	mustAppend(t, s, "exec-busy", 0, batch("exec-busy", 0, 2))
	token, err := s.AcquireFence(context.Background(), "exec-fenced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireFence(context.Background(), "exec-fenced"); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	type call struct {
		name string
		ch   <-chan error
	}
	var calls []call
	start := func(name string, f func() error) {
		ch := make(chan error, 1)
		go func() { ch <- f() }()
		calls = append(calls, call{name, ch})
		awaitQueued(db, len(calls))
	}
	bg := context.Background()
	start("good-0", func() error { return s.Append(bg, "exec-good-0", 0, batch("exec-good-0", 0, 3)) })
	start("stale", func() error { return s.Append(bg, "exec-busy", 1, batch("exec-busy", 1, 1)) })
	start("good-1", func() error { return s.Append(bg, "exec-good-1", 0, batch("exec-good-1", 0, 1)) })
	start("fenced", func() error { return s.AppendFenced(bg, "exec-fenced", token, 0, batch("exec-fenced", 0, 1)) })
	start("first", func() error { return s.Append(bg, "exec-race", 0, batch("exec-race", 0, 2)) })
	start("second", func() error { return s.Append(bg, "exec-race", 0, batch("exec-race", 0, 1)) })
	start("after-first", func() error { return s.Append(bg, "exec-race", 2, batch("exec-race", 2, 1)) })
	start("good-2", func() error { return s.Append(bg, "exec-busy", 2, batch("exec-busy", 2, 1)) })
	before := db.WriteStats()
	release()

	want := map[string]func(error) bool{
		"good-0": isNil, "good-1": isNil, "first": isNil, "after-first": isNil, "good-2": isNil,
		"stale": isConflict, "second": isConflict,
		"fenced": func(err error) bool { var fe *store.FencedError; return errors.As(err, &fe) },
	}
	for _, c := range calls {
		if err := <-c.ch; !want[c.name](err) {
			t.Errorf("%s: unexpected result %v", c.name, err)
		}
	}
	if st := db.WriteStats(); st.Transactions-before.Transactions != 1 || st.Batches-before.Batches != 5 {
		t.Fatalf("stats moved by %+v (from %+v), want one transaction of 5 batches", st, before)
	}
	for exec, n := range map[string]int{"exec-good-0": 3, "exec-good-1": 1, "exec-race": 3, "exec-busy": 3, "exec-fenced": 0} {
		if l := logLength(t, s, exec); l != n {
			t.Errorf("log of %s holds %d events, want %d", exec, l, n)
		}
	}
}

func isNil(err error) bool { return err == nil }

// A batch SQLite itself refuses (here a trigger aborts its insert) rolls the
// group back; the writer then retries each batch alone, so only that batch
// fails.
func TestGroupCommitStatementFailureIsolated(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	err := db.w.run(context.Background(), func(c *rawConn) error {
		_, err := c.exec(`CREATE TEMP TRIGGER poison BEFORE INSERT ON main.events
			WHEN NEW.event_type = 'POISON' BEGIN SELECT RAISE(ABORT, 'poisoned row'); END`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	bad := batch("exec-bad", 0, 2)
	bad[1].Type = "POISON"
	goodA := appendAsync(context.Background(), s, "exec-a", 0, batch("exec-a", 0, 2))
	awaitQueued(db, 1)
	badCh := appendAsync(context.Background(), s, "exec-bad", 0, bad)
	awaitQueued(db, 2)
	goodB := appendAsync(context.Background(), s, "exec-b", 0, batch("exec-b", 0, 1))
	awaitQueued(db, 3)
	release()
	if err := <-goodA; err != nil {
		t.Fatalf("neighbour before the bad batch: %v", err)
	}
	if err := <-goodB; err != nil {
		t.Fatalf("neighbour after the bad batch: %v", err)
	}
	if err := <-badCh; err == nil || !strings.Contains(err.Error(), "poisoned row") {
		t.Fatalf("bad batch: %v, want the trigger's abort", err)
	}
	if logLength(t, s, "exec-a") != 2 || logLength(t, s, "exec-b") != 1 || logLength(t, s, "exec-bad") != 0 {
		t.Fatal("logs do not hold exactly the good batches")
	}
	page, err := s.ListExecutions(context.Background(), "", 10)
	if err != nil || len(page.Executions) != 2 {
		t.Fatalf("listing %+v, %v: want exec-a and exec-b only", page, err)
	}
	mustAppend(t, s, "exec-bad", 0, batch("exec-bad", 0, 1))
}

func TestAppendCanceledWhileQueuedWritesNothing(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	release := holdWriter(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	ch := appendAsync(ctx, s, "exec-c", 0, batch("exec-c", 0, 1))
	awaitQueued(db, 1)
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled queued Append = %v, want context.Canceled", err)
	}
	release()
	if l := logLength(t, s, "exec-c"); l != 0 {
		t.Fatalf("canceled append wrote %d events", l)
	}
	mustAppend(t, s, "exec-c", 0, batch("exec-c", 0, 1))
	if st := db.WriteStats(); st.Batches != 1 {
		t.Fatalf("stats %+v, want only the later append", st)
	}
}

// Once the writer has taken a request, cancelling its context no longer
// abandons it: the caller waits for, and gets, the real outcome.
func TestCancelAfterTakenWaitsForOutcome(t *testing.T) {
	db := openTestDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := db.w.run(ctx, func(*rawConn) error {
		cancel()
		return nil
	})
	if err != nil {
		t.Fatalf("run = %v, want nil: the op ran", err)
	}
}

func TestAppendWithDoneContextWritesNothing(t *testing.T) {
	db := openTestDB(t)
	s := db.EventStore()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Append(ctx, "exec-d", 0, batch("exec-d", 0, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a done context = %v", err)
	}
	if l := logLength(t, s, "exec-d"); l != 0 {
		t.Fatalf("wrote %d events", l)
	}
}
