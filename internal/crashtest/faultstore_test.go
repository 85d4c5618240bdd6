package crashtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// events returns n contiguous envelopes of exec from seq.
func events(exec string, from int64, n int) []event.Envelope {
	out := make([]event.Envelope, n)
	for i := range out {
		seq := from + int64(i)
		out[i] = event.Envelope{ID: exec + "#" + strconv.FormatInt(seq, 10), WorkflowID: "wf", ExecutionID: exec,
			Type: "TEST_EVENT", Sequence: seq, Timestamp: 1, Payload: json.RawMessage(`{}`)}
	}
	return out
}

func logLen(t *testing.T, s store.EventStore, exec string) int {
	t.Helper()
	evs, err := store.Read(context.Background(), s, exec)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func killed(f *crashtest.FaultStore) bool {
	select {
	case <-f.Killed():
		return true
	default:
		return false
	}
}

func TestFaultStoreWritesThePrefixUpToTheLimitThenDies(t *testing.T) {
	ctx := context.Background()
	inner := memstore.NewEventStore()
	f := crashtest.NewFaultStore(inner)
	f.KillAfter(5)
	if err := f.Append(ctx, "x", 0, events("x", 0, 3)); err != nil {
		t.Fatal(err)
	}
	err := f.Append(ctx, "x", 3, events("x", 3, 4))
	if !errors.Is(err, crashtest.ErrKilled) {
		t.Fatalf("crossing append = %v, want ErrKilled", err)
	}
	if n := logLen(t, inner, "x"); n != 5 || f.Appended() != 5 {
		t.Fatalf("log holds %d events, %d counted; want the 5 up to the limit", n, f.Appended())
	}
	if !f.Dead() || !killed(f) {
		t.Fatal("the store is not dead after the kill")
	}
	// Dead: nothing more is written, not even to another execution.
	for _, exec := range []string{"x", "y"} {
		if err := f.Append(ctx, exec, int64(logLen(t, inner, exec)), events(exec, int64(logLen(t, inner, exec)), 1)); !errors.Is(err, crashtest.ErrKilled) {
			t.Fatalf("append to %s after death = %v", exec, err)
		}
	}
	if logLen(t, inner, "x") != 5 || logLen(t, inner, "y") != 0 {
		t.Fatal("a dead store wrote")
	}
	// Reads and subscriptions outlive the process.
	sub, err := f.Subscribe(ctx, "x", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if e := <-sub.Events(); e.Sequence != 4 {
		t.Fatalf("subscription delivered %d", e.Sequence)
	}
	if evs, err := f.ReadRange(ctx, "x", 1, 3); err != nil || len(evs) != 2 {
		t.Fatalf("ReadRange = %d events, %v", len(evs), err)
	}
}

func TestFaultStoreAtTheExactLimitDiesOnlyOnTheNextWrite(t *testing.T) {
	ctx := context.Background()
	inner := memstore.NewEventStore()
	f := crashtest.NewFaultStore(inner)
	f.KillAfter(2)
	if err := f.Append(ctx, "x", 0, events("x", 0, 2)); err != nil {
		t.Fatalf("an append ending at the limit failed: %v", err)
	}
	if f.Dead() {
		t.Fatal("dead before any write crossed the limit")
	}
	if err := f.Append(ctx, "x", 2, events("x", 2, 1)); !errors.Is(err, crashtest.ErrKilled) {
		t.Fatalf("append past the limit = %v", err)
	}
	if n := logLen(t, inner, "x"); n != 2 {
		t.Fatalf("log holds %d events", n)
	}
}

func TestFaultStoreCountsOnlyDurableEvents(t *testing.T) {
	ctx := context.Background()
	inner := memstore.NewEventStore()
	f := crashtest.NewFaultStore(inner)
	f.KillAfter(3)
	if err := f.Append(ctx, "x", 0, events("x", 0, 2)); err != nil {
		t.Fatal(err)
	}
	// A refused append (wrong expected sequence) within the limit writes
	// nothing and counts nothing.
	if err := f.Append(ctx, "x", 0, events("x", 0, 1)); !errors.Is(err, store.ErrSequenceConflict) {
		t.Fatalf("conflicting append = %v", err)
	}
	if f.Appended() != 2 || f.Dead() {
		t.Fatalf("counted %d, dead %v after a refused append", f.Appended(), f.Dead())
	}
	// A prefix copy is all or nothing: one that would cross the limit dies
	// unwritten.
	if err := f.CopyPrefix(ctx, "x", "fork", 1); !errors.Is(err, crashtest.ErrKilled) {
		t.Fatalf("crossing copy = %v", err)
	}
	if logLen(t, inner, "fork") != 0 {
		t.Fatal("a killed copy wrote")
	}
}

func TestFaultStoreRefusesCapabilitiesTheInnerStoreLacks(t *testing.T) {
	ctx := context.Background()
	// bare hides every optional capability of the memory store.
	type bare struct{ store.EventStore }
	f := crashtest.NewFaultStore(bare{memstore.NewEventStore()})
	if _, err := f.Subscribe(ctx, "x", 0); err == nil {
		t.Fatal("Subscribe forwarded to a store without it")
	}
	if _, err := f.ReadRange(ctx, "x", 0, 1); err == nil {
		t.Fatal("ReadRange forwarded to a store without it")
	}
	if err := f.CopyPrefix(ctx, "x", "y", 0); err == nil {
		t.Fatal("CopyPrefix forwarded to a store without it")
	}
}

func TestFaultStoreKillStopsEveryLaterWrite(t *testing.T) {
	ctx := context.Background()
	inner := memstore.NewEventStore()
	f := crashtest.NewFaultStore(inner)
	if err := f.Append(ctx, "x", 0, events("x", 0, 2)); err != nil {
		t.Fatal(err)
	}
	f.Kill()
	if !f.Dead() || !killed(f) {
		t.Fatal("Kill left the store alive")
	}
	if err := f.Append(ctx, "x", 2, events("x", 2, 1)); !errors.Is(err, crashtest.ErrKilled) {
		t.Fatalf("append after Kill = %v, want ErrKilled", err)
	}
	f.Kill() // killing the dead does nothing
	if n := logLen(t, inner, "x"); n != 2 || f.Appended() != 2 {
		t.Fatalf("log holds %d events, %d counted; want the 2 written before the kill", n, f.Appended())
	}
}
