package storetest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// timerHandle is one open "connection" to a shared memstore.TimerStore, so
// the kit's Reopen subtest runs against the reference store too.
type timerHandle struct {
	*memstore.TimerStore
	closed atomic.Bool
}

func (h *timerHandle) Put(ctx context.Context, t store.Timer) error {
	if h.closed.Load() {
		return store.ErrClosed
	}
	return h.TimerStore.Put(ctx, t)
}

func (h *timerHandle) Get(ctx context.Context, key string) (store.Timer, bool, error) {
	if h.closed.Load() {
		return store.Timer{}, false, store.ErrClosed
	}
	return h.TimerStore.Get(ctx, key)
}

func (h *timerHandle) Due(ctx context.Context, now int64, limit int) ([]store.Timer, error) {
	if h.closed.Load() {
		return nil, store.ErrClosed
	}
	return h.TimerStore.Due(ctx, now, limit)
}

func (h *timerHandle) Delete(ctx context.Context, key string, wakeAt int64) (bool, error) {
	if h.closed.Load() {
		return false, store.ErrClosed
	}
	return h.TimerStore.Delete(ctx, key, wakeAt)
}

// Close ends the handle; the shared store lives on.
func (h *timerHandle) Close() error {
	if h.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// TestTimerStoreKitReopen runs the TimerStore kit, Reopen included.
func TestTimerStoreKitReopen(t *testing.T) {
	storetest.RunTimerStore(t, storetest.TimerStoreFactory{
		New: func(*testing.T) store.TimerStore {
			return &timerHandle{TimerStore: memstore.NewTimerStore()}
		},
		Reopen: func(_ *testing.T, closed store.TimerStore) store.TimerStore {
			return &timerHandle{TimerStore: closed.(*timerHandle).TimerStore}
		},
	})
}
