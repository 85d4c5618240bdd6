package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// closed: after Close every method returns store.ErrClosed.
func (k snapshotKit) closed(t *testing.T) {
	s := k.open(t)
	mustSave(t, s, snapshotAt("x", 1))
	closeStore(t, s)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want store.ErrClosed", what, err)
		}
	}
	check("Save", s.Save(ctx, snapshotAt("x", 2)))
	_, _, err := s.LoadLatest(ctx, "x")
	check("LoadLatest", err)
	_, _, err = s.LoadAt(ctx, "x", 1)
	check("LoadAt", err)
	if l, ok := s.(store.SnapshotLister); ok {
		_, err := l.ListSequences(ctx, "x")
		check("ListSequences", err)
	}
	if p, ok := s.(store.SnapshotPruner); ok {
		_, err := p.Prune(ctx, "x", 5)
		check("Prune", err)
	}
	if d, ok := s.(store.SnapshotDeleter); ok {
		check("DeleteExecution", d.DeleteExecution(ctx, "x"))
	}
}

// reopen: snapshots survive a close and a reopen.
func (k snapshotKit) reopen(t *testing.T) {
	s := k.open(t)
	text, big, y := snapshotAt("x", 3), snapshotAt("x", 9), snapshotAt("y", 1)
	text.SchemaVersion = "1.25.0"
	big.State = stringPayload(256 << 10)
	mustSave(t, s, text, big, y)
	closeStore(t, s)
	s = openStore(t, "SnapshotStoreFactory.Reopen", func(t *testing.T) store.SnapshotStore { return k.f.Reopen(t, s) })
	latest(t, s, "x", &big)
	at(t, s, "x", 8, &text)
	latest(t, s, "y", &y)
	more := snapshotAt("x", 12)
	mustSave(t, s, more)
	latest(t, s, "x", &more)
}
