package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// branchHandle is one open "connection" to a shared memstore.BranchRegistry.
type branchHandle struct {
	*memstore.BranchRegistry
	closed atomic.Bool
}

func (h *branchHandle) CreateRef(ctx context.Context, name, id string) (store.Ref, error) {
	if h.closed.Load() {
		return store.Ref{}, store.ErrClosed
	}
	return h.BranchRegistry.CreateRef(ctx, name, id)
}

func (h *branchHandle) MoveRef(ctx context.Context, name, id string, expected int64) (store.Ref, error) {
	if h.closed.Load() {
		return store.Ref{}, store.ErrClosed
	}
	return h.BranchRegistry.MoveRef(ctx, name, id, expected)
}

func (h *branchHandle) ReadRef(ctx context.Context, name string) (store.Ref, error) {
	if h.closed.Load() {
		return store.Ref{}, store.ErrClosed
	}
	return h.BranchRegistry.ReadRef(ctx, name)
}

func (h *branchHandle) ListRefs(ctx context.Context, prefix string) ([]store.Ref, error) {
	if h.closed.Load() {
		return nil, store.ErrClosed
	}
	return h.BranchRegistry.ListRefs(ctx, prefix)
}

// Close ends the handle; the shared registry lives on.
func (h *branchHandle) Close() error {
	if h.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// TestBranchRegistryKitReopen runs the BranchRegistry kit, Reopen included.
func TestBranchRegistryKitReopen(t *testing.T) {
	storetest.RunBranchRegistry(t, storetest.BranchRegistryFactory{
		New: func(*testing.T) store.BranchRegistry {
			return &branchHandle{BranchRegistry: memstore.NewBranchRegistry()}
		},
		Reopen: func(_ *testing.T, closed store.BranchRegistry) store.BranchRegistry {
			return &branchHandle{BranchRegistry: closed.(*branchHandle).BranchRegistry}
		},
	})
}
