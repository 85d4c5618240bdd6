package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// sequences lists the snapshot sequences of exec through l.
func sequences(t *testing.T, l store.SnapshotLister, exec string) []int64 {
	t.Helper()
	seqs, err := l.ListSequences(context.Background(), exec)
	if err != nil {
		t.Fatalf("ListSequences(%q): %v", exec, err)
	}
	return seqs
}

// listSequences: ListSequences is ascending whatever the save order, per
// execution, and empty for an unknown one.
func (k snapshotKit) listSequences(t *testing.T) {
	s := k.open(t)
	l, ok := s.(store.SnapshotLister)
	if !ok {
		t.Skip("store does not implement store.SnapshotLister")
	}
	for _, seq := range []int64{40, 3, 17, 0, 1000, 5} {
		mustSave(t, s, snapshotAt("x", seq))
	}
	mustSave(t, s, snapshotAt("y", 9))
	if got := sequences(t, l, "x"); !slices.Equal(got, []int64{0, 3, 5, 17, 40, 1000}) {
		t.Fatalf("ListSequences(x) = %v, want [0 3 5 17 40 1000]", got)
	}
	if got := sequences(t, l, "y"); !slices.Equal(got, []int64{9}) {
		t.Fatalf("ListSequences(y) = %v, want [9]", got)
	}
	if got := sequences(t, l, "unknown"); len(got) != 0 {
		t.Fatalf("ListSequences(unknown) = %v, want none", got)
	}
}

// prune: Prune deletes exactly the snapshots below its bound, reports how
// many, and leaves the rest (and other executions) loadable.
func (k snapshotKit) prune(t *testing.T) {
	s := k.open(t)
	p, ok := s.(store.SnapshotPruner)
	if !ok {
		t.Skip("store does not implement store.SnapshotPruner")
	}
	ctx := context.Background()
	s1, s3, s5, s7 := snapshotAt("x", 1), snapshotAt("x", 3), snapshotAt("x", 5), snapshotAt("x", 7)
	y := snapshotAt("y", 1)
	mustSave(t, s, s1, s3, s5, s7, y)
	prune := func(below int64, want int) {
		t.Helper()
		n, err := p.Prune(ctx, "x", below)
		if err != nil || n != want {
			t.Fatalf("Prune(x, below %d) = %d, %v; want %d, nil", below, n, err, want)
		}
	}
	prune(5, 2)
	at(t, s, "x", 4, nil)
	at(t, s, "x", 6, &s5)
	latest(t, s, "x", &s7)
	latest(t, s, "y", &y)
	prune(5, 0)
	prune(0, 0)
	if n, err := p.Prune(ctx, "unknown", 100); err != nil || n != 0 {
		t.Fatalf("Prune(unknown) = %d, %v; want 0, nil", n, err)
	}
	if l, ok := s.(store.SnapshotLister); ok {
		if got := sequences(t, l, "x"); !slices.Equal(got, []int64{5, 7}) {
			t.Fatalf("ListSequences after Prune = %v, want [5 7]", got)
		}
	}
	prune(8, 2)
	latest(t, s, "x", nil)
}

// deleteExecution: DeleteExecution removes every snapshot of one execution,
// is idempotent and leaves others alone; a later Save starts afresh.
func (k snapshotKit) deleteExecution(t *testing.T) {
	s := k.open(t)
	d, ok := s.(store.SnapshotDeleter)
	if !ok {
		t.Skip("store does not implement store.SnapshotDeleter")
	}
	ctx := context.Background()
	y := snapshotAt("y", 4)
	mustSave(t, s, snapshotAt("x", 1), snapshotAt("x", 2), y)
	for range 2 {
		if err := d.DeleteExecution(ctx, "x"); err != nil {
			t.Fatalf("DeleteExecution(x): %v", err)
		}
		latest(t, s, "x", nil)
		at(t, s, "x", 100, nil)
	}
	if err := d.DeleteExecution(ctx, "never"); err != nil {
		t.Fatalf("DeleteExecution(never): %v", err)
	}
	latest(t, s, "y", &y)
	again := snapshotAt("x", 1)
	mustSave(t, s, again)
	latest(t, s, "x", &again)
}
