package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// snapshotHandle is one open "connection" to a shared memstore.SnapshotStore.
type snapshotHandle struct {
	*memstore.SnapshotStore
	closed atomic.Bool
}

func (h *snapshotHandle) Save(ctx context.Context, s store.Snapshot) error {
	if h.closed.Load() {
		return store.ErrClosed
	}
	return h.SnapshotStore.Save(ctx, s)
}

func (h *snapshotHandle) LoadLatest(ctx context.Context, id string) (store.Snapshot, bool, error) {
	if h.closed.Load() {
		return store.Snapshot{}, false, store.ErrClosed
	}
	return h.SnapshotStore.LoadLatest(ctx, id)
}

func (h *snapshotHandle) LoadAt(ctx context.Context, id string, atMost int64) (store.Snapshot, bool, error) {
	if h.closed.Load() {
		return store.Snapshot{}, false, store.ErrClosed
	}
	return h.SnapshotStore.LoadAt(ctx, id, atMost)
}

func (h *snapshotHandle) ListSequences(ctx context.Context, id string) ([]int64, error) {
	if h.closed.Load() {
		return nil, store.ErrClosed
	}
	return h.SnapshotStore.ListSequences(ctx, id)
}

func (h *snapshotHandle) Prune(ctx context.Context, id string, below int64) (int, error) {
	if h.closed.Load() {
		return 0, store.ErrClosed
	}
	return h.SnapshotStore.Prune(ctx, id, below)
}

func (h *snapshotHandle) DeleteExecution(ctx context.Context, id string) error {
	if h.closed.Load() {
		return store.ErrClosed
	}
	return h.SnapshotStore.DeleteExecution(ctx, id)
}

// Close ends the handle; the shared store lives on.
func (h *snapshotHandle) Close() error {
	if h.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// TestSnapshotStoreKitReopen runs the SnapshotStore kit, Reopen included.
func TestSnapshotStoreKitReopen(t *testing.T) {
	storetest.RunSnapshotStore(t, storetest.SnapshotStoreFactory{
		New: func(*testing.T) store.SnapshotStore {
			return &snapshotHandle{SnapshotStore: memstore.NewSnapshotStore()}
		},
		Reopen: func(_ *testing.T, closed store.SnapshotStore) store.SnapshotStore {
			return &snapshotHandle{SnapshotStore: closed.(*snapshotHandle).SnapshotStore}
		},
	})
}
