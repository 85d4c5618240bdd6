package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// closed: after Close every method returns store.ErrClosed.
func (k branchKit) closed(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	closeStore(t, r)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	_, err := r.CreateRef(ctx, "other", "exec-2")
	check("CreateRef", err)
	_, err = r.MoveRef(ctx, "main", "exec-2", 1)
	check("MoveRef", err)
	_, err = r.ReadRef(ctx, "main")
	check("ReadRef", err)
	_, err = r.ListRefs(ctx, "")
	check("ListRefs", err)
}

// reopen: refs and their versions survive a close and a reopen, and
// compare-and-set continues from the stored version.
func (k branchKit) reopen(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	move(t, r, "main", "exec-2", 1, 2)
	sim := mustCreate(t, r, "sim/é", "exec-3")
	closeStore(t, r)
	r = openStore(t, "BranchRegistryFactory.Reopen", func(t *testing.T) store.BranchRegistry { return k.f.Reopen(t, r) })
	expectRef(t, r, store.Ref{Name: "main", ExecutionID: "exec-2", Version: 2})
	expectRef(t, r, sim)
	if _, err := r.MoveRef(context.Background(), "main", "exec-x", 1); !errors.Is(err, store.ErrRefConflict) {
		t.Fatalf("MoveRef at a pre-reopen stale version = %v, want store.ErrRefConflict", err)
	}
	move(t, r, "main", "exec-4", 2, 3)
	if got := listRefNames(t, r, ""); !slices.Equal(got, []string{"main", "sim/é"}) {
		t.Fatalf("ListRefs after reopen = %q", got)
	}
}
