package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loom-kernel/loom/event"
)

// holdWriter takes every leadership of the writer, so a test can queue
// appends, then hand back all but one: the next leader takes them as one
// group.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	for range maxLeaders {
		db.w.token <- struct{}{}
	}
	var once sync.Once
	release = func() { once.Do(func() { <-db.w.token }) }
	t.Cleanup(func() {
		release()
		for range maxLeaders - 1 {
			<-db.w.token
		}
	})
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
	t.Parallel()
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
		if l := len(logOf(t, s, exec)); l != 1+i%3 {
			t.Fatalf("log of %s holds %d events, want %d", exec, l, 1+i%3)
		}
	}
}

func TestGroupCommitGroupsFreeRunningAppenders(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	s := db.EventStore()
	const appenders, appends = 32, 50
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Go(func() {
			exec := fmt.Sprintf("exec-%02d", w)
			for seq := range int64(appends) {
				if err := s.Append(context.Background(), exec, seq, batch(exec, seq, 1)); err != nil {
					t.Errorf("Append(%s, %d): %v", exec, seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := db.WriteStats()
	if st.Batches != appenders*appends || st.Events != appenders*appends {
		t.Fatalf("stats %+v, want %d batches and events", st, appenders*appends)
	}
	// While the leader commits one group the other appenders queue the
	// next, so batches outnumber transactions.
	if st.Transactions >= st.Batches {
		t.Fatalf("%d batches took %d transactions: no grouping", st.Batches, st.Transactions)
	}
	t.Logf("%d batches in %d transactions (%.1f per commit)", st.Batches, st.Transactions,
		float64(st.Batches)/float64(st.Transactions))
}

// A refused batch (a stale expected sequence, a stale fence, the loser of a
// race inside the group) inserts nothing and gets its typed error, while the
// rest of the group commits in the same transaction.
func TestGroupCommitRefusalsDoNotPoisonNeighbours(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	s := db.EventStore()
	bg := context.Background()
	mustAppend(t, s, "exec-busy", 0, batch("exec-busy", 0, 2))
	token, err := s.AcquireFence(bg, "exec-fenced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireFence(bg, "exec-fenced"); err != nil {
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
		"stale": isConflict, "second": isConflict, "fenced": isFenced,
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
		if l := len(logOf(t, s, exec)); l != n {
			t.Errorf("log of %s holds %d events, want %d", exec, l, n)
		}
	}
}

// A batch refused inside its group whose log has, by the time the refusal
// is judged, reached its expected length (here: a later batch of the same
// group got there first) is tried again, and lands.
func TestGroupCommitRechecksARefusalTheLogNowAccepts(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	s := db.EventStore()
	release := holdWriter(t, db)
	later := appendAsync(context.Background(), s, "exec-x", 2, batch("exec-x", 2, 1))
	awaitQueued(db, 1)
	first := appendAsync(context.Background(), s, "exec-x", 0, batch("exec-x", 0, 2))
	awaitQueued(db, 2)
	release()
	if err := <-first; err != nil {
		t.Fatalf("append at 0: %v", err)
	}
	if err := <-later; err != nil {
		t.Fatalf("append at 2, queued before the one at 0: %v", err)
	}
	if l := len(logOf(t, s, "exec-x")); l != 3 {
		t.Fatalf("log holds %d events, want 3", l)
	}
}

// A batch PostgreSQL itself refuses (here a CHECK constraint fails on its
// row) rolls the group's transaction back; the writer then retries each
// batch alone, so only that batch fails.
func TestGroupCommitStatementFailureIsolated(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	s := db.EventStore()
	adminExec(t, `ALTER TABLE `+quoted(db.Schema())+`.events ADD CONSTRAINT poison CHECK (event_type <> 'POISON')`)
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
	err := <-badCh
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.ConstraintName, "poison") || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("bad batch: %v, want the CHECK violation of poison", err)
	}
	if len(logOf(t, s, "exec-a")) != 2 || len(logOf(t, s, "exec-b")) != 1 || len(logOf(t, s, "exec-bad")) != 0 {
		t.Fatal("logs do not hold exactly the good batches")
	}
	page, err := s.ListExecutions(context.Background(), "", 10)
	if err != nil || len(page.Executions) != 2 {
		t.Fatalf("listing %+v, %v: want exec-a and exec-b only", page, err)
	}
	mustAppend(t, s, "exec-bad", 0, batch("exec-bad", 0, 1))
}

func TestAppendCanceledWhileQueuedWritesNothing(t *testing.T) {
	t.Parallel()
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
	if l := len(logOf(t, s, "exec-c")); l != 0 {
		t.Fatalf("canceled append wrote %d events", l)
	}
	mustAppend(t, s, "exec-c", 0, batch("exec-c", 0, 1))
	if st := db.WriteStats(); st.Batches != 1 {
		t.Fatalf("stats %+v, want only the later append", st)
	}
}

// notCommitted decides whether a failed group may be retried batch by
// batch: only when the server rolled it back for sure.
func TestNotCommittedClassification(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"statement error", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23514"}, true},
		{"wrapped statement error", fmt.Errorf("x: %w", &pgconn.PgError{SeverityUnlocalized: "ERROR"}), true},
		{"localized severity only", &pgconn.PgError{Severity: "ERROR"}, true},
		{"server ended the session", &pgconn.PgError{SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"panic", &pgconn.PgError{SeverityUnlocalized: "PANIC"}, false},
		{"broken connection", errors.New("read tcp: connection reset by peer"), false},
	}
	for _, c := range cases {
		if got := notCommitted(c.err); got != c.want {
			t.Errorf("%s: notCommitted = %v, want %v", c.name, got, c.want)
		}
	}
}
