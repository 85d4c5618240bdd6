package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// racers is the number of appenders racing on one execution.
const racers = 32

// raceRounds runs rounds in which racers appenders, spread over stores,
// append a batch at the same expected sequence of one execution. Exactly one
// wins each round; every other is refused with a SequenceConflictError
// naming the winner's length; the log ends as the winners' batches, with no
// gap and nothing of a loser's.
func raceRounds(t *testing.T, stores []*EventStore, rounds int) {
	t.Helper()
	const exec = "exec-race"
	var want []event.Envelope
	for round := range rounds {
		expected := int64(len(want))
		size := 1 + round%3
		batches := make([][]event.Envelope, racers)
		for c := range batches {
			batches[c] = batch(exec, expected, size)
			for i := range batches[c] {
				batches[c][i].ID = fmt.Sprintf("r%d-c%d-%d", round, c, i)
			}
		}
		errs := make([]error, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range racers {
			wg.Go(func() {
				<-start
				errs[c] = stores[c%len(stores)].Append(context.Background(), exec, expected, batches[c])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for c, err := range errs {
			var ce *store.SequenceConflictError
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both appended at %d", round, winner, c, expected)
			case err == nil:
				winner = c
			case !errors.As(err, &ce) || ce.Expected != expected || ce.Actual != expected+int64(size):
				t.Fatalf("round %d: racer %d: %v, want a SequenceConflictError expecting %d at %d",
					round, c, err, expected, expected+int64(size))
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer appended at %d", round, expected)
		}
		want = append(want, batches[winner]...)
		for _, s := range stores {
			got := logOf(t, s, exec)
			if len(got) != len(want) {
				t.Fatalf("round %d: log holds %d events, want %d", round, len(got), len(want))
			}
			for i := range want {
				if got[i].ID != want[i].ID {
					t.Fatalf("round %d: event %d is %q, want the winner's %q", round, i, got[i].ID, want[i].ID)
				}
			}
		}
	}
}

// 32 appenders of one process race on one execution: the group commit puts
// them in one transaction, where the first claims the row and the others'
// conditions fail.
func TestRacingAppendersOneExecution(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	raceRounds(t, []*EventStore{db.EventStore()}, 8)
}

// 32 appenders race on one execution from four DBs (four pools and four
// group-commit writers, as four nodes would): their transactions meet on
// the execution row's lock, and each loser re-checks against the winner's
// committed length.
func TestRacingAppendersAcrossDBs(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	var stores []*EventStore
	for range 4 {
		stores = append(stores, openDB(t, schema).EventStore())
	}
	raceRounds(t, stores, 8)
}

// A gap is refused like a duplicate: the expected length must be the log's
// length exactly, from any process.
func TestAppendRefusesGapsAcrossDBs(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openDB(t, schema).EventStore(), openDB(t, schema).EventStore()
	mustAppend(t, a, "exec-g", 0, batch("exec-g", 0, 3))
	for _, expected := range []int64{4, 10, 2, 0} {
		err := b.Append(context.Background(), "exec-g", expected, batch("exec-g", expected, 1))
		var ce *store.SequenceConflictError
		if !errors.As(err, &ce) || ce.Actual != 3 || ce.Expected != expected {
			t.Fatalf("Append at %d to a log of 3 = %v, want a SequenceConflictError at 3", expected, err)
		}
	}
	err := b.Append(context.Background(), "exec-new", 1, batch("exec-new", 1, 1))
	if !isConflict(err) {
		t.Fatalf("Append at 1 to a new log = %v, want a SequenceConflictError", err)
	}
	mustAppend(t, b, "exec-g", 3, batch("exec-g", 3, 1))
	if n := len(logOf(t, a, "exec-g")); n != 4 {
		t.Fatalf("log holds %d events, want 4", n)
	}
}

// A zombie driver: A appends under its token until it is refused; B (another
// DB) acquires a newer token meanwhile. No append of A may land after B's
// AcquireFence returned: the log's length read then is its final length.
func TestFencedZombieCannotAppendAfterNewerToken(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openDB(t, schema).EventStore(), openDB(t, schema).EventStore()
	ctx := context.Background()
	const exec = "exec-zombie"
	old, err := a.AcquireFence(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	warm := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		for seq := int64(0); ; seq++ {
			if seq == 5 {
				close(warm)
			}
			if err := a.AppendFenced(ctx, exec, old, seq, batch(exec, seq, 1)); err != nil {
				result <- err
				return
			}
		}
	}()
	<-warm
	newer, err := b.AcquireFence(ctx, exec)
	if err != nil {
		t.Fatal(err)
	}
	atFence := int64(len(logOf(t, b, exec)))
	err = <-result
	var fe *store.FencedError
	if !errors.As(err, &fe) || fe.Token != old || fe.Current != newer {
		t.Fatalf("zombie's append = %v, want a FencedError (token %d, current %d)", err, old, newer)
	}
	if n := int64(len(logOf(t, b, exec))); n != atFence {
		t.Fatalf("the log grew from %d to %d after the newer token was acquired", atFence, n)
	}
	if err := b.AppendFenced(ctx, exec, newer, atFence, batch(exec, atFence, 1)); err != nil {
		t.Fatalf("the new driver's append: %v", err)
	}
}

// DeleteExecution keeps the fence (tokens only grow) and lets the log start
// again at 0, and the listing drops the execution until then.
func TestDeleteKeepsFenceAcrossDBs(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := openDB(t, schema).EventStore(), openDB(t, schema).EventStore()
	ctx := context.Background()
	t1, err := a.AcquireFence(ctx, "exec-d")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AppendFenced(ctx, "exec-d", t1, 0, batch("exec-d", 0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteExecution(ctx, "exec-d"); err != nil {
		t.Fatal(err)
	}
	page, err := a.ListExecutions(ctx, "", 10)
	if err != nil || len(page.Executions) != 0 {
		t.Fatalf("listing after delete = %+v, %v; want empty", page, err)
	}
	t2, err := b.AcquireFence(ctx, "exec-d")
	if err != nil || t2 <= t1 {
		t.Fatalf("AcquireFence after delete = %d, %v; want above %d", t2, err, t1)
	}
	if err := a.AppendFenced(ctx, "exec-d", t1, 0, batch("exec-d", 0, 1)); !isFenced(err) {
		t.Fatalf("append under the pre-delete token = %v, want a FencedError", err)
	}
	if err := b.AppendFenced(ctx, "exec-d", t2, 0, batch("exec-d", 0, 1)); err != nil {
		t.Fatal(err)
	}
}
