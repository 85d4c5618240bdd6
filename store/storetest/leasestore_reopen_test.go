package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// leaseHandle is one open "connection" to a shared memstore.LeaseStore, so
// the kit's Reopen subtest runs against the reference store too.
type leaseHandle struct {
	*memstore.LeaseStore
	closed atomic.Bool
}

func (h *leaseHandle) Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (store.Lease, error) {
	if h.closed.Load() {
		return store.Lease{}, store.ErrClosed
	}
	return h.LeaseStore.Acquire(ctx, executionID, owner, now, ttlMs)
}

func (h *leaseHandle) Renew(ctx context.Context, l store.Lease, now, ttlMs int64) (store.Lease, error) {
	if h.closed.Load() {
		return store.Lease{}, store.ErrClosed
	}
	return h.LeaseStore.Renew(ctx, l, now, ttlMs)
}

func (h *leaseHandle) Release(ctx context.Context, l store.Lease) error {
	if h.closed.Load() {
		return store.ErrClosed
	}
	return h.LeaseStore.Release(ctx, l)
}

func (h *leaseHandle) Get(ctx context.Context, executionID string) (store.Lease, bool, error) {
	if h.closed.Load() {
		return store.Lease{}, false, store.ErrClosed
	}
	return h.LeaseStore.Get(ctx, executionID)
}

// Close ends the handle; the shared store lives on.
func (h *leaseHandle) Close() error {
	if h.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// TestLeaseStoreKitReopen runs the LeaseStore kit, Reopen included.
func TestLeaseStoreKitReopen(t *testing.T) {
	storetest.RunLeaseStore(t, storetest.LeaseStoreFactory{
		New: func(*testing.T) store.LeaseStore {
			return &leaseHandle{LeaseStore: memstore.NewLeaseStore()}
		},
		Reopen: func(_ *testing.T, closed store.LeaseStore) store.LeaseStore {
			return &leaseHandle{LeaseStore: closed.(*leaseHandle).LeaseStore}
		},
	})
}
