package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// forkSource appends six varied events to "src" and returns them.
func forkSource(t *testing.T, s store.EventStore) []event.Envelope {
	t.Helper()
	src := batchAt("src", 0, 6)
	src[1].Payload = json.RawMessage("{ \"big\" : 12345678901234567890, \"f\": 1.0 }")
	src[2].Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`), "html": json.RawMessage(`"<>&"`)}
	src[3].Payload = stringPayload(4096)
	mustAppend(t, s, "src", 0, src[:3])
	mustAppend(t, s, "src", 3, src[3:])
	return src
}

// withExecution returns copies of evs carrying exec as their execution id.
func withExecution(evs []event.Envelope, exec string) []event.Envelope {
	out := make([]event.Envelope, len(evs))
	for i, e := range evs {
		e.ExecutionID = exec
		out[i] = e
	}
	return out
}

// copyPrefix: CopyPrefix copies exactly sequences 0..through, identical but
// for the execution id; the source is untouched and the copy continues at
// through+1.
func (k eventKit) copyPrefix(t *testing.T) {
	s := k.open(t)
	pc, ok := s.(store.PrefixCopier)
	if !ok {
		t.Skip("store does not implement store.PrefixCopier")
	}
	src := forkSource(t, s)
	ctx := context.Background()
	if err := pc.CopyPrefix(ctx, "src", "fork", 3); err != nil {
		t.Fatalf("CopyPrefix(src, fork, 3): %v", err)
	}
	fork := withExecution(src[:4], "fork")
	assertLog(t, s, "fork", fork)
	assertLog(t, s, "src", src)

	next := batchAt("fork", 4, 2)
	mustAppend(t, s, "fork", 4, next)
	assertLog(t, s, "fork", append(fork, next...))
	if err := s.Append(ctx, "fork", 3, batchAt("fork", 3, 1)); !errors.Is(err, store.ErrSequenceConflict) {
		t.Fatalf("Append to the fork at 3 = %v, want store.ErrSequenceConflict", err)
	}

	if err := pc.CopyPrefix(ctx, "src", "whole", 5); err != nil {
		t.Fatalf("CopyPrefix(src, whole, 5): %v", err)
	}
	assertLog(t, s, "whole", withExecution(src, "whole"))
	if err := pc.CopyPrefix(ctx, "src", "first", 0); err != nil {
		t.Fatalf("CopyPrefix(src, first, 0): %v", err)
	}
	assertLog(t, s, "first", withExecution(src[:1], "first"))
	infos := listAll(t, s, "", 10)
	want := map[string]int64{"first": 1, "fork": 6, "src": 6, "whole": 6}
	if len(infos) != len(want) {
		t.Fatalf("listing = %+v, want %v", infos, want)
	}
	for _, info := range infos {
		if want[info.ExecutionID] != info.Length || info.WorkflowID != src[0].WorkflowID {
			t.Fatalf("listing entry %+v, want length %d and workflow %q", info, want[info.ExecutionID], src[0].WorkflowID)
		}
	}
}

// copyPrefixRefusals: an existing target is refused with
// *store.SequenceConflictError, a through past the source's end (or an
// unknown source) with *store.InvalidAppendError; neither writes anything.
func (k eventKit) copyPrefixRefusals(t *testing.T) {
	s := k.open(t)
	pc, ok := s.(store.PrefixCopier)
	if !ok {
		t.Skip("store does not implement store.PrefixCopier")
	}
	src := forkSource(t, s)
	taken := batchAt("taken", 0, 2)
	mustAppend(t, s, "taken", 0, taken)
	ctx := context.Background()

	err := pc.CopyPrefix(ctx, "src", "taken", 1)
	var ce *store.SequenceConflictError
	if !errors.Is(err, store.ErrSequenceConflict) || !errors.As(err, &ce) || ce.ExecutionID != "taken" {
		t.Fatalf("CopyPrefix onto an existing execution = %v, want a SequenceConflictError on %q", err, "taken")
	}
	assertLog(t, s, "taken", taken)

	for _, c := range []struct {
		name, from string
		through    int64
	}{
		{"ThroughAtLength", "src", int64(len(src))},
		{"ThroughFarBeyond", "src", 1000},
		{"UnknownSource", "nosuch", 0},
	} {
		err := pc.CopyPrefix(ctx, c.from, "target", c.through)
		var ie *store.InvalidAppendError
		if !errors.Is(err, store.ErrInvalidAppend) || !errors.As(err, &ie) {
			t.Fatalf("%s: CopyPrefix(%q, target, %d) = %v, want *store.InvalidAppendError", c.name, c.from, c.through, err)
		}
		assertLog(t, s, "target", nil)
	}
	assertLog(t, s, "src", src)
	assertListed(t, s, "src", "taken")
	if err := pc.CopyPrefix(ctx, "src", "target", 2); err != nil {
		t.Fatalf("CopyPrefix after the refusals: %v", err)
	}
	assertLog(t, s, "target", withExecution(src[:3], "target"))
}

// deleteExecution: DeleteExecution empties a log and drops it from the
// listing, is idempotent (also for an unknown execution), leaves other
// executions alone, and an append at 0 starts the log again.
func (k eventKit) deleteExecution(t *testing.T) {
	s := k.open(t)
	del, ok := s.(store.ExecutionDeleter)
	if !ok {
		t.Skip("store does not implement store.ExecutionDeleter")
	}
	ctx := context.Background()
	for _, exec := range []string{"a", "b", "c"} {
		mustAppend(t, s, exec, 0, batchAt(exec, 0, 3))
	}
	if err := del.DeleteExecution(ctx, "b"); err != nil {
		t.Fatalf("DeleteExecution(b): %v", err)
	}
	assertLog(t, s, "b", nil)
	assertListed(t, s, "a", "c")
	for _, exec := range []string{"b", "never-existed"} {
		if err := del.DeleteExecution(ctx, exec); err != nil {
			t.Fatalf("DeleteExecution(%q) again: %v, want nil", exec, err)
		}
	}
	assertLog(t, s, "a", batchAt("a", 0, 3))
	assertLog(t, s, "c", batchAt("c", 0, 3))

	err := s.Append(ctx, "b", 3, batchAt("b", 3, 1))
	if !errors.Is(err, store.ErrSequenceConflict) {
		t.Fatalf("Append to a deleted execution at its old length = %v, want store.ErrSequenceConflict", err)
	}
	reborn := batchAt("b", 0, 1)
	reborn[0].ID = "reborn"
	mustAppend(t, s, "b", 0, reborn)
	assertLog(t, s, "b", reborn)
	assertListed(t, s, "a", "b", "c")
}

// fencing: tokens strictly increase per execution; an append under a stale
// token is refused with *store.FencedError and writes nothing; the newest
// token appends, still under the sequence check; fences of one execution do
// not affect another.
func (k eventKit) fencing(t *testing.T) {
	s := k.open(t)
	f, ok := s.(store.Fencer)
	if !ok {
		t.Skip("store does not implement store.Fencer")
	}
	ctx := context.Background()
	const exec = "exec-fenced"
	acquire := func(exec string) int64 {
		t.Helper()
		tok, err := f.AcquireFence(ctx, exec)
		if err != nil {
			t.Fatalf("AcquireFence(%q): %v", exec, err)
		}
		return tok
	}
	t1 := acquire(exec)
	t2 := acquire(exec)
	if t2 <= t1 {
		t.Fatalf("AcquireFence returned %d after %d; tokens must strictly increase", t2, t1)
	}
	stale := func(token, expected int64, current int64) {
		t.Helper()
		err := f.AppendFenced(ctx, exec, token, expected, batchAt(exec, expected, 1))
		var fe *store.FencedError
		if !errors.Is(err, store.ErrFenced) || !errors.As(err, &fe) {
			t.Fatalf("AppendFenced under stale token %d = %v, want *store.FencedError", token, err)
		}
		if fe.ExecutionID != exec || fe.Token != token || fe.Current != current {
			t.Fatalf("FencedError = %+v, want token %d, current %d", *fe, token, current)
		}
	}
	stale(t1, 0, t2)
	assertLog(t, s, exec, nil)
	if err := f.AppendFenced(ctx, exec, t2, 0, batchAt(exec, 0, 2)); err != nil {
		t.Fatalf("AppendFenced under the current token: %v", err)
	}
	t3 := acquire(exec)
	if t3 <= t2 {
		t.Fatalf("AcquireFence returned %d after %d; tokens must strictly increase", t3, t2)
	}
	stale(t2, 2, t3)
	assertLog(t, s, exec, batchAt(exec, 0, 2))

	acquire("exec-other")
	if err := f.AppendFenced(ctx, exec, t3, 2, batchAt(exec, 2, 1)); err != nil {
		t.Fatalf("AppendFenced after fencing another execution: %v", err)
	}
	err := f.AppendFenced(ctx, exec, t3, 1, batchAt(exec, 1, 1))
	if !errors.Is(err, store.ErrSequenceConflict) {
		t.Fatalf("AppendFenced at an old sequence = %v, want store.ErrSequenceConflict", err)
	}
	err = f.AppendFenced(ctx, exec, t3, 3, []event.Envelope{})
	if !errors.Is(err, store.ErrInvalidAppend) {
		t.Fatalf("AppendFenced of an empty batch = %v, want store.ErrInvalidAppend", err)
	}
	assertLog(t, s, exec, batchAt(exec, 0, 3))
}
