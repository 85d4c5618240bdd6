package storetest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// The memstore tests cannot reach the kits' Reopen subtests: an in-memory
// store has nothing to reopen. These tests run the kits against handles over
// memstore stores that outlive the handle's Close, the way a file outlives a
// closed database connection, so the Reopen subtests are themselves tested
// before a durable store relies on them.

// eventHandle is one open "connection" to a shared memstore.EventStore.
type eventHandle struct {
	inner *memstore.EventStore

	mu     sync.Mutex
	closed bool
	subs   []*store.Subscription
}

// open fails with store.ErrClosed once the handle is closed.
func (h *eventHandle) open() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return store.ErrClosed
	}
	return nil
}

func (h *eventHandle) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if err := h.open(); err != nil {
		return err
	}
	return h.inner.Append(ctx, id, expected, evs)
}

func (h *eventHandle) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	if err := h.open(); err != nil {
		return nil, err
	}
	return h.inner.ReadFrom(ctx, id, from)
}

func (h *eventHandle) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	if err := h.open(); err != nil {
		return nil, err
	}
	return h.inner.ReadRange(ctx, id, from, to)
}

func (h *eventHandle) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := h.open(); err != nil {
		return store.ExecutionPage{}, err
	}
	return h.inner.ListExecutions(ctx, after, limit)
}

func (h *eventHandle) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, store.ErrClosed
	}
	sub, err := h.inner.Subscribe(ctx, id, from)
	if err == nil {
		h.subs = append(h.subs, sub)
	}
	return sub, err
}

func (h *eventHandle) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	if err := h.open(); err != nil {
		return err
	}
	return h.inner.CopyPrefix(ctx, from, to, through)
}

func (h *eventHandle) DeleteExecution(ctx context.Context, id string) error {
	if err := h.open(); err != nil {
		return err
	}
	return h.inner.DeleteExecution(ctx, id)
}

func (h *eventHandle) AcquireFence(ctx context.Context, id string) (int64, error) {
	if err := h.open(); err != nil {
		return 0, err
	}
	return h.inner.AcquireFence(ctx, id)
}

func (h *eventHandle) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	if err := h.open(); err != nil {
		return err
	}
	return h.inner.AppendFenced(ctx, id, token, expected, evs)
}

func (h *eventHandle) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := h.open(); err != nil {
		return store.UnfinishedPage{}, err
	}
	return h.inner.ListUnfinished(ctx, after, limit)
}

// Close ends the handle and its subscriptions; the shared store lives on.
func (h *eventHandle) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return store.ErrClosed
	}
	h.closed = true
	subs := h.subs
	h.subs = nil
	h.mu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
	return nil
}

// TestEventStoreKitReopen runs the EventStore kit, Reopen included.
func TestEventStoreKitReopen(t *testing.T) {
	const limit = 4 << 10
	storetest.RunEventStore(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			inner := memstore.NewEventStore(memstore.WithLimits(event.Limits{MaxPayloadBytes: limit}))
			t.Cleanup(func() { _ = inner.Close() })
			return &eventHandle{inner: inner}
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return &eventHandle{inner: closed.(*eventHandle).inner}
		},
		MaxPayloadBytes: limit,
	})
}

// TestStatusIndexKitReopen runs the StatusIndex kit, Reopen included.
func TestStatusIndexKitReopen(t *testing.T) {
	storetest.RunStatusIndex(t, storetest.EventStoreFactory{
		New: func(t *testing.T) store.EventStore {
			inner := memstore.NewEventStore()
			t.Cleanup(func() { _ = inner.Close() })
			return &eventHandle{inner: inner}
		},
		Reopen: func(t *testing.T, closed store.EventStore) store.EventStore {
			return &eventHandle{inner: closed.(*eventHandle).inner}
		},
	})
}
