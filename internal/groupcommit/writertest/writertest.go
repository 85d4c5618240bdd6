// Package writertest is the conformance kit of a group-committing event
// store (the SQLite and PostgreSQL writers, both on internal/groupcommit):
// queued appends share one transaction, a refused or failing batch fails
// only its own caller, and an append cancelled while queued writes nothing.
// The store's own SPI behaviour is store/storetest's; this kit checks how
// appends are grouped, through hooks each plugin gives into its writer.
package writertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Stats counts what a writer committed since it opened.
type Stats struct{ Transactions, Batches, Events int64 }

// Writer is one freshly opened store under test and its hooks.
type Writer struct {
	// Store is the event store; it must also be a store.Fencer.
	Store store.EventStore
	// Stats reads the writer's counters.
	Stats func() Stats
	// Hold stops the writer from committing until release is called;
	// appends made meanwhile queue, and the next leader takes them all as
	// one group. It returns once the writer is held.
	Hold func(t *testing.T) (release func())
	// Queued is the number of appends waiting in the writer's queue.
	Queued func() int
	// Poison makes the database itself refuse, with a statement error,
	// any row of event type "POISON"; IsPoisonError recognises that error.
	Poison        func(t *testing.T)
	IsPoisonError func(error) bool
	// Rechecks says a refused batch whose log reached its expected length
	// within the same group is tried again (and lands) rather than refused.
	Rechecks bool
}

// Run runs the kit; open returns a fresh store for each test, closed by
// the caller's cleanup.
func Run(t *testing.T, open func(t *testing.T) Writer) {
	tests := []struct {
		name string
		run  func(*testing.T, Writer)
	}{
		{"QueueDrainsIntoOneTransaction", queueDrainsIntoOneTransaction},
		{"FreeRunningAppendersAreGrouped", freeRunningAppendersAreGrouped},
		{"RefusalsDoNotFailNeighbours", refusalsDoNotFailNeighbours},
		{"RefusalTheLogNowAcceptsIsRechecked", refusalTheLogNowAcceptsIsRechecked},
		{"StatementFailureIsIsolated", statementFailureIsIsolated},
		{"AppendCanceledWhileQueuedWritesNothing", appendCanceledWhileQueuedWritesNothing},
		{"AppendWithDoneContextWritesNothing", appendWithDoneContextWritesNothing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

func queueDrainsIntoOneTransaction(t *testing.T, w Writer) {
	release := w.Hold(t)
	const n = 32
	results := make([]<-chan error, n)
	for i := range results {
		exec := fmt.Sprintf("exec-%02d", i)
		results[i] = appendAsync(context.Background(), w.Store, exec, 0, Batch(exec, 0, 1+i%3))
	}
	awaitQueued(w, n)
	before := w.Stats()
	release()
	for i, ch := range results {
		if err := <-ch; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got := w.Stats()
	if txs, batches := got.Transactions-before.Transactions, got.Batches-before.Batches; txs != 1 || batches != n {
		t.Fatalf("%d queued appends committed in %d transactions as %d batches, want 1 and %d", n, txs, batches, n)
	}
	for i := range n {
		exec := fmt.Sprintf("exec-%02d", i)
		if l := LogLength(t, w.Store, exec); l != 1+i%3 {
			t.Fatalf("log of %s holds %d events, want %d", exec, l, 1+i%3)
		}
	}
}

func freeRunningAppendersAreGrouped(t *testing.T, w Writer) {
	const appenders, appends = 32, 50
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			exec := fmt.Sprintf("exec-%02d", a)
			for seq := range int64(appends) {
				if err := w.Store.Append(context.Background(), exec, seq, Batch(exec, seq, 1)); err != nil {
					t.Errorf("Append(%s, %d): %v", exec, seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := w.Stats()
	if st.Batches != appenders*appends || st.Events != appenders*appends {
		t.Fatalf("stats %+v, want %d batches and events", st, appenders*appends)
	}
	// While one group commits the other appenders queue the next, so
	// batches outnumber transactions.
	if st.Transactions >= st.Batches {
		t.Fatalf("%d batches took %d transactions: no grouping", st.Batches, st.Transactions)
	}
	t.Logf("%d batches in %d transactions (%.1f per commit)", st.Batches, st.Transactions,
		float64(st.Batches)/float64(st.Transactions))
}

func refusalsDoNotFailNeighbours(t *testing.T, w Writer) {
	s, bg := w.Store, context.Background()
	fencer := s.(store.Fencer)
	MustAppend(t, s, "exec-busy", 0, Batch("exec-busy", 0, 2))
	token, err := fencer.AcquireFence(bg, "exec-fenced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fencer.AcquireFence(bg, "exec-fenced"); err != nil {
		t.Fatal(err)
	}
	release := w.Hold(t)
	type call struct {
		name string
		ch   <-chan error
	}
	var calls []call
	start := func(name string, f func() error) {
		ch := make(chan error, 1)
		go func() { ch <- f() }()
		calls = append(calls, call{name, ch})
		awaitQueued(w, len(calls))
	}
	start("good-0", func() error { return s.Append(bg, "exec-good-0", 0, Batch("exec-good-0", 0, 3)) })
	start("stale", func() error { return s.Append(bg, "exec-busy", 1, Batch("exec-busy", 1, 1)) })
	start("good-1", func() error { return s.Append(bg, "exec-good-1", 0, Batch("exec-good-1", 0, 1)) })
	start("fenced", func() error { return fencer.AppendFenced(bg, "exec-fenced", token, 0, Batch("exec-fenced", 0, 1)) })
	start("first", func() error { return s.Append(bg, "exec-race", 0, Batch("exec-race", 0, 2)) })
	start("second", func() error { return s.Append(bg, "exec-race", 0, Batch("exec-race", 0, 1)) })
	start("after-first", func() error { return s.Append(bg, "exec-race", 2, Batch("exec-race", 2, 1)) })
	start("good-2", func() error { return s.Append(bg, "exec-busy", 2, Batch("exec-busy", 2, 1)) })
	before := w.Stats()
	release()

	isNil := func(err error) bool { return err == nil }
	isConflict := func(err error) bool { return errors.Is(err, store.ErrSequenceConflict) }
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
	if st := w.Stats(); st.Transactions-before.Transactions != 1 || st.Batches-before.Batches != 5 {
		t.Fatalf("stats moved by %+v (from %+v), want one transaction of 5 batches", st, before)
	}
	for _, c := range []struct {
		exec string
		n    int
	}{{"exec-good-0", 3}, {"exec-good-1", 1}, {"exec-race", 3}, {"exec-busy", 3}, {"exec-fenced", 0}} {
		if l := LogLength(t, s, c.exec); l != c.n {
			t.Errorf("log of %s holds %d events, want %d", c.exec, l, c.n)
		}
	}
}

// A batch refused inside its group whose log has, by the time the refusal
// is judged, reached its expected length (a later batch of the same group
// got there first) is tried again and lands — where the writer rechecks;
// otherwise it is refused as a conflict and writes nothing.
func refusalTheLogNowAcceptsIsRechecked(t *testing.T, w Writer) {
	s := w.Store
	release := w.Hold(t)
	later := appendAsync(context.Background(), s, "exec-x", 2, Batch("exec-x", 2, 1))
	awaitQueued(w, 1)
	first := appendAsync(context.Background(), s, "exec-x", 0, Batch("exec-x", 0, 2))
	awaitQueued(w, 2)
	release()
	if err := <-first; err != nil {
		t.Fatalf("append at 0: %v", err)
	}
	err, want := <-later, 2
	switch {
	case w.Rechecks && err != nil:
		t.Fatalf("append at 2, queued before the one at 0: %v", err)
	case w.Rechecks:
		want = 3
	case !errors.Is(err, store.ErrSequenceConflict):
		t.Fatalf("append at 2, queued before the one at 0: %v, want a sequence conflict", err)
	}
	if l := LogLength(t, s, "exec-x"); l != want {
		t.Fatalf("log holds %d events, want %d", l, want)
	}
}

// A batch the database itself refuses rolls the group back; the writer then
// retries each batch alone, so only that batch fails.
func statementFailureIsIsolated(t *testing.T, w Writer) {
	s := w.Store
	w.Poison(t)
	release := w.Hold(t)
	bad := Batch("exec-bad", 0, 2)
	bad[1].Type = "POISON"
	goodA := appendAsync(context.Background(), s, "exec-a", 0, Batch("exec-a", 0, 2))
	awaitQueued(w, 1)
	badCh := appendAsync(context.Background(), s, "exec-bad", 0, bad)
	awaitQueued(w, 2)
	goodB := appendAsync(context.Background(), s, "exec-b", 0, Batch("exec-b", 0, 1))
	awaitQueued(w, 3)
	release()
	for name, ch := range map[string]<-chan error{"exec-a": goodA, "exec-b": goodB} { //loom:order-independent each checked alone
		if err := <-ch; err != nil {
			t.Errorf("%s failed beside the poisoned batch: %v", name, err)
		}
	}
	if err := <-badCh; !w.IsPoisonError(err) {
		t.Fatalf("bad batch: %v, want the database's refusal of the poisoned row", err)
	}
	if LogLength(t, s, "exec-a") != 2 || LogLength(t, s, "exec-b") != 1 || LogLength(t, s, "exec-bad") != 0 {
		t.Fatal("wrong logs after the isolated failure")
	}
}

func appendCanceledWhileQueuedWritesNothing(t *testing.T, w Writer) {
	s := w.Store
	release := w.Hold(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := appendAsync(ctx, s, "exec-c", 0, Batch("exec-c", 0, 1))
	awaitQueued(w, 1)
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled queued Append = %v, want context.Canceled", err)
	}
	release()
	if l := LogLength(t, s, "exec-c"); l != 0 {
		t.Fatalf("canceled append wrote %d events", l)
	}
	MustAppend(t, s, "exec-c", 0, Batch("exec-c", 0, 1))
	if st := w.Stats(); st.Batches != 1 {
		t.Fatalf("stats %+v, want only the later append", st)
	}
}

func appendWithDoneContextWritesNothing(t *testing.T, w Writer) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Store.Append(ctx, "exec-d", 0, Batch("exec-d", 0, 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a done context = %v", err)
	}
	if l := LogLength(t, w.Store, "exec-d"); l != 0 {
		t.Fatalf("wrote %d events", l)
	}
}

// awaitQueued spins until n appends wait in the writer's queue. The writer
// is held, so the count only grows; no clock is involved.
func awaitQueued(w Writer, n int) {
	for w.Queued() < n {
		runtime.Gosched()
	}
}

func appendAsync(ctx context.Context, s store.EventStore, exec string, expected int64, evs []event.Envelope) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Append(ctx, exec, expected, evs) }()
	return ch
}

// Batch returns n contiguous envelopes of exec from sequence from.
func Batch(exec string, from int64, n int) []event.Envelope {
	out := make([]event.Envelope, n)
	for i := range out {
		seq := from + int64(i)
		out[i] = event.Envelope{
			ID: exec + "#" + strconv.FormatInt(seq, 10), ExecutionID: exec, WorkflowID: "wf", Sequence: seq,
			Type: "TEST_EVENT", Timestamp: 1_700_000_000_000 + seq,
			Payload: json.RawMessage(`{"exec":` + strconv.Quote(exec) + `,"seq":` + strconv.FormatInt(seq, 10) + `}`),
		}
	}
	return out
}

// MustAppend appends or fails the test.
func MustAppend(t testing.TB, s store.EventStore, exec string, expected int64, evs []event.Envelope) {
	t.Helper()
	if err := s.Append(context.Background(), exec, expected, evs); err != nil {
		t.Fatalf("Append(%q, %d): %v", exec, expected, err)
	}
}

// Log reads exec's whole log and checks its sequences are 0..n-1.
func Log(t testing.TB, s store.EventStore, exec string) []event.Envelope {
	t.Helper()
	evs, err := s.ReadFrom(context.Background(), exec, 0)
	if err != nil {
		t.Fatalf("ReadFrom(%q): %v", exec, err)
	}
	for i, e := range evs {
		if e.Sequence != int64(i) {
			t.Fatalf("log of %q: event %d has sequence %d", exec, i, e.Sequence)
		}
	}
	return evs
}

// LogLength is the length of exec's log, read and checked by Log.
func LogLength(t testing.TB, s store.EventStore, exec string) int {
	t.Helper()
	return len(Log(t, s, exec))
}
