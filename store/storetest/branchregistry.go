package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// BranchRegistryFactory builds the registries RunBranchRegistry checks.
type BranchRegistryFactory struct {
	// New returns a fresh, empty registry; the kit closes it. It is called
	// once per subtest.
	New func(t *testing.T) store.BranchRegistry
	// Reopen is optional: it reopens the durable storage behind a registry
	// New returned, after the kit closed it. When nil the Reopen subtest is
	// left out.
	Reopen func(t *testing.T, closed store.BranchRegistry) store.BranchRegistry
}

// branchKit carries the factory through the BranchRegistry subtests.
type branchKit struct{ f BranchRegistryFactory }

// RunBranchRegistry runs the BranchRegistry conformance kit against the
// registries f builds, one fresh registry per named subtest: create and
// read, duplicate create, missing refs, compare-and-set moves (stale
// versions refused with nothing changed, AnyVersion), prefix listing in
// code-point order, invalid names, concurrent movers, Close, and Reopen when
// f.Reopen is set.
func RunBranchRegistry(t *testing.T, f BranchRegistryFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: BranchRegistryFactory.New is nil")
	}
	k := branchKit{f: f}
	t.Run("CreateAndRead", k.createAndRead)
	t.Run("DuplicateCreate", k.duplicateCreate)
	t.Run("ReadMissing", k.readMissing)
	t.Run("MoveWithVersion", k.moveWithVersion)
	t.Run("MoveStaleVersion", k.moveStaleVersion)
	t.Run("MoveAnyVersion", k.moveAnyVersion)
	t.Run("MoveMissing", k.moveMissing)
	t.Run("ListByPrefix", k.listByPrefix)
	t.Run("InvalidNames", k.invalidNames)
	t.Run("ConcurrentMovers", k.concurrentMovers)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: BranchRegistryFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// open returns a fresh registry for one subtest.
func (k branchKit) open(t *testing.T) store.BranchRegistry {
	t.Helper()
	return openStore(t, "BranchRegistryFactory.New", k.f.New)
}

// mustCreate creates a ref and checks it starts at version 1.
func mustCreate(t *testing.T, r store.BranchRegistry, name, exec string) store.Ref {
	t.Helper()
	ref, err := r.CreateRef(context.Background(), name, exec)
	if err != nil {
		t.Fatalf("CreateRef(%q, %q): %v", name, exec, err)
	}
	want := store.Ref{Name: name, ExecutionID: exec, Version: 1}
	if ref != want {
		t.Fatalf("CreateRef = %+v, want %+v", ref, want)
	}
	return ref
}

// expectRef reads name and requires it to equal want.
func expectRef(t *testing.T, r store.BranchRegistry, want store.Ref) {
	t.Helper()
	got, err := r.ReadRef(context.Background(), want.Name)
	if err != nil {
		t.Fatalf("ReadRef(%q): %v", want.Name, err)
	}
	if got != want {
		t.Fatalf("ReadRef(%q) = %+v, want %+v", want.Name, got, want)
	}
}

// expectNotFound requires err to match store.ErrRefNotFound.
func expectNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrRefNotFound) {
		t.Fatalf("%s = %v, want store.ErrRefNotFound", what, err)
	}
}

// createAndRead: a new ref starts at version 1 and reads back.
func (k branchKit) createAndRead(t *testing.T) {
	r := k.open(t)
	main := mustCreate(t, r, "main", "exec-1")
	expectRef(t, r, main)
	other := mustCreate(t, r, "sim/é", "exec-2")
	expectRef(t, r, other)
	expectRef(t, r, main)
}

// duplicateCreate: creating a taken name returns store.ErrRefExists and
// leaves the ref as it was.
func (k branchKit) duplicateCreate(t *testing.T) {
	r := k.open(t)
	main := mustCreate(t, r, "main", "exec-1")
	_, err := r.CreateRef(context.Background(), "main", "exec-2")
	if !errors.Is(err, store.ErrRefExists) {
		t.Fatalf("CreateRef of a taken name = %v, want store.ErrRefExists", err)
	}
	expectRef(t, r, main)
}

// readMissing: a ref never created, or a name differing by case or by a
// prefix, is store.ErrRefNotFound.
func (k branchKit) readMissing(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	for _, name := range []string{"nope", "Main", "mai", "main/x"} {
		_, err := r.ReadRef(context.Background(), name)
		expectNotFound(t, fmt.Sprintf("ReadRef(%q)", name), err)
	}
}

// move moves name and requires success with the given version.
func move(t *testing.T, r store.BranchRegistry, name, exec string, expected, wantVersion int64) store.Ref {
	t.Helper()
	ref, err := r.MoveRef(context.Background(), name, exec, expected)
	if err != nil {
		t.Fatalf("MoveRef(%q, %q, %d): %v", name, exec, expected, err)
	}
	want := store.Ref{Name: name, ExecutionID: exec, Version: wantVersion}
	if ref != want {
		t.Fatalf("MoveRef = %+v, want %+v", ref, want)
	}
	expectRef(t, r, want)
	return ref
}

// moveWithVersion: a move at the current version succeeds and increments it.
func (k branchKit) moveWithVersion(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	move(t, r, "main", "exec-2", 1, 2)
	move(t, r, "main", "exec-3", 2, 3)
	move(t, r, "main", "exec-3", 3, 4) // a move to the same execution still counts
}

// moveStaleVersion: a move at an old or future version is refused with
// *store.RefConflictError and changes nothing.
func (k branchKit) moveStaleVersion(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	cur := move(t, r, "main", "exec-2", 1, 2)
	for _, expected := range []int64{1, 3, 0} {
		_, err := r.MoveRef(context.Background(), "main", "exec-stale", expected)
		var ce *store.RefConflictError
		if !errors.Is(err, store.ErrRefConflict) || !errors.As(err, &ce) {
			t.Fatalf("MoveRef at version %d = %v, want *store.RefConflictError", expected, err)
		}
		if ce.Name != "main" || ce.Expected != expected || ce.Actual != 2 {
			t.Fatalf("RefConflictError = %+v, want {main %d 2}", *ce, expected)
		}
		expectRef(t, r, cur)
	}
}

// moveAnyVersion: store.AnyVersion moves unconditionally, still counting.
func (k branchKit) moveAnyVersion(t *testing.T) {
	r := k.open(t)
	mustCreate(t, r, "main", "exec-1")
	move(t, r, "main", "exec-2", store.AnyVersion, 2)
	move(t, r, "main", "exec-3", store.AnyVersion, 3)
}

// moveMissing: moving a ref that does not exist is store.ErrRefNotFound and
// does not create it, with a version or with AnyVersion.
func (k branchKit) moveMissing(t *testing.T) {
	r := k.open(t)
	ctx := context.Background()
	for _, expected := range []int64{1, store.AnyVersion} {
		_, err := r.MoveRef(ctx, "ghost", "exec-1", expected)
		expectNotFound(t, fmt.Sprintf("MoveRef(ghost, %d)", expected), err)
	}
	_, err := r.ReadRef(ctx, "ghost")
	expectNotFound(t, "ReadRef(ghost) after a refused move", err)
}

// invalidNames: empty names and names with NUL or other control characters
// or invalid UTF-8 are refused with an error, and nothing is created.
func (k branchKit) invalidNames(t *testing.T) {
	r := k.open(t)
	ctx := context.Background()
	mustCreate(t, r, "main", "exec-1")
	for _, name := range []string{"", "a\x00b", "line\nbreak", "bad\xff"} {
		if _, err := r.CreateRef(ctx, name, "exec-1"); err == nil {
			t.Fatalf("CreateRef(%q) succeeded; want a refusal", name)
		}
		if _, err := r.MoveRef(ctx, name, "exec-1", store.AnyVersion); err == nil {
			t.Fatalf("MoveRef(%q) succeeded; want a refusal", name)
		}
	}
	if got := listRefNames(t, r, ""); !slices.Equal(got, []string{"main"}) {
		t.Fatalf("after refused creates, ListRefs = %q, want [main]", got)
	}
}

// concurrentMovers: 16 goroutines move one ref from the same version at
// once; exactly one wins, every other gets *store.RefConflictError, and the
// ref holds the winner's execution at the next version.
func (k branchKit) concurrentMovers(t *testing.T) {
	r := k.open(t)
	const movers = 16
	mustCreate(t, r, "main", "exec-0")
	for round := int64(1); round <= 4; round++ {
		errs := make([]error, movers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for m := range movers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[m] = r.MoveRef(context.Background(), "main", fmt.Sprintf("exec-%d-%d", round, m), round)
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for m, err := range errs {
			var ce *store.RefConflictError
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: movers %d and %d both moved the ref from version %d", round, winner, m, round)
			case err == nil:
				winner = m
			case !errors.As(err, &ce) || ce.Actual != round+1:
				t.Fatalf("round %d: mover %d: %v, want a RefConflictError at version %d", round, m, err, round+1)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no mover moved the ref", round)
		}
		expectRef(t, r, store.Ref{Name: "main", ExecutionID: fmt.Sprintf("exec-%d-%d", round, winner), Version: round + 1})
	}
}
