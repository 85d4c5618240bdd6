package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// contentHandle is one open "connection" to a shared memstore.ContentStore,
// so the kit's Reopen subtest runs against the reference store too.
type contentHandle struct {
	*memstore.ContentStore
	closed atomic.Bool
}

func (h *contentHandle) Put(ctx context.Context, data []byte) (string, error) {
	if h.closed.Load() {
		return "", store.ErrClosed
	}
	return h.ContentStore.Put(ctx, data)
}

func (h *contentHandle) Get(ctx context.Context, ref string) ([]byte, error) {
	if h.closed.Load() {
		return nil, store.ErrClosed
	}
	return h.ContentStore.Get(ctx, ref)
}

func (h *contentHandle) Delete(ctx context.Context, ref string) error {
	if h.closed.Load() {
		return store.ErrClosed
	}
	return h.ContentStore.Delete(ctx, ref)
}

// Close ends the handle; the shared store lives on.
func (h *contentHandle) Close() error {
	if h.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// TestContentStoreKitReopen runs the ContentStore kit, Reopen included.
func TestContentStoreKitReopen(t *testing.T) {
	storetest.RunContentStore(t, storetest.ContentStoreFactory{
		New: func(*testing.T) store.ContentStore {
			return &contentHandle{ContentStore: memstore.NewContentStore()}
		},
		Reopen: func(_ *testing.T, closed store.ContentStore) store.ContentStore {
			return &contentHandle{ContentStore: closed.(*contentHandle).ContentStore}
		},
		Count: func(t *testing.T, s store.ContentStore) int {
			n, _, err := s.(*contentHandle).Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			return n
		},
	})
}
