package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// closed: after Close, every method (optional ones included) returns an
// error matching store.ErrClosed; a second Close returns nil or ErrClosed.
func (k eventKit) closed(t *testing.T) {
	s := k.open(t)
	mustAppend(t, s, "exec", 0, batchAt("exec", 0, 2))
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	check("Append", s.Append(ctx, "exec", 2, batchAt("exec", 2, 1)))
	check("Append of a new execution", s.Append(ctx, "new", 0, batchAt("new", 0, 1)))
	_, err := s.ReadFrom(ctx, "exec", 0)
	check("ReadFrom", err)
	_, err = s.ListExecutions(ctx, "", 10)
	check("ListExecutions", err)
	if rr, ok := s.(store.RangeReader); ok {
		_, err := rr.ReadRange(ctx, "exec", 0, 2)
		check("ReadRange", err)
	}
	if sub, ok := s.(store.Subscriber); ok {
		sn, err := sub.Subscribe(ctx, "exec", 0)
		check("Subscribe", err)
		if sn != nil {
			sn.Close()
		}
	}
	if pc, ok := s.(store.PrefixCopier); ok {
		check("CopyPrefix", pc.CopyPrefix(ctx, "exec", "copy", 0))
	}
	if del, ok := s.(store.ExecutionDeleter); ok {
		check("DeleteExecution", del.DeleteExecution(ctx, "exec"))
	}
	if f, ok := s.(store.Fencer); ok {
		_, err := f.AcquireFence(ctx, "exec")
		check("AcquireFence", err)
		check("AppendFenced", f.AppendFenced(ctx, "exec", 1, 2, batchAt("exec", 2, 1)))
	}
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close = %v, want nil or store.ErrClosed", err)
	}
}

// reopen: events of several executions, the listing and the fence tokens
// survive a close and a reopen, and appends continue at the right sequence.
func (k eventKit) reopen(t *testing.T) {
	s := k.open(t)
	ctx := context.Background()
	logs := map[string][]event.Envelope{}
	for i, exec := range []string{"r-a", "r-b", "r-é", "r-日本"} {
		evs := batchAt(exec, 0, 1+3*i)
		if i == 1 {
			evs[0].Payload = stringPayload(min(64<<10, k.payloadCap))
		}
		mustAppend(t, s, exec, 0, evs[:1])
		if len(evs) > 1 {
			mustAppend(t, s, exec, 1, evs[1:])
		}
		logs[exec] = evs
	}
	var token int64
	f, fenced := s.(store.Fencer)
	if fenced {
		var err error
		if token, err = f.AcquireFence(ctx, "r-a"); err != nil {
			t.Fatalf("AcquireFence: %v", err)
		}
	}
	closeStore(t, s)

	s = openStore(t, "EventStoreFactory.Reopen", func(t *testing.T) store.EventStore { return k.f.Reopen(t, s) })
	for exec, want := range logs {
		assertLog(t, s, exec, want)
	}
	infos := listAll(t, s, "", 3)
	if len(infos) != len(logs) {
		t.Fatalf("after reopen the listing holds %d executions, want %d", len(infos), len(logs))
	}
	for _, info := range infos {
		if info.Length != int64(len(logs[info.ExecutionID])) {
			t.Fatalf("after reopen: listing entry %+v, want length %d", info, len(logs[info.ExecutionID]))
		}
	}
	for exec, want := range logs {
		n := int64(len(want))
		if err := s.Append(ctx, exec, n-1, batchAt(exec, n-1, 1)); !errors.Is(err, store.ErrSequenceConflict) {
			t.Fatalf("after reopen, Append(%q) at %d = %v, want store.ErrSequenceConflict", exec, n-1, err)
		}
		next := batchAt(exec, n, 1)
		mustAppend(t, s, exec, n, next)
		assertLog(t, s, exec, append(want, next...))
	}
	if fenced {
		if f, fenced = s.(store.Fencer); !fenced {
			t.Fatal("the reopened store is not a store.Fencer, though the store New returned was")
		}
		newer, err := f.AcquireFence(ctx, "r-a")
		if err != nil {
			t.Fatalf("AcquireFence after reopen: %v", err)
		}
		if newer <= token {
			t.Fatalf("AcquireFence after reopen returned %d, not above %d from before it", newer, token)
		}
		n := int64(len(logs["r-a"]) + 1)
		err = f.AppendFenced(ctx, "r-a", token, n, batchAt("r-a", n, 1))
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("AppendFenced under a token from before the reopen = %v, want store.ErrFenced", err)
		}
	}
}
