package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// countingStore decorates an event store and counts its Append calls and
// the events they carry. Each Append is one durable commit the runtime
// pays for: the journal's tail writes whatever is queued in one call, and a
// barrier waits for it. In WriteBehind the tail also starts writing as soon
// as an event is queued, so a workflow can pay more appends than it has
// barriers; counting the calls, not the barriers, is the honest figure.
// It forwards the optional capabilities the runtime uses on these workloads
// (Subscriber for the waits, RangeReader for loads); it offers no other.
//
// A reading waits until no Append is in flight: a waiter can see a commit
// (through a subscription) before the Append that made it returns here, so
// a count read as soon as a workload's last wait returns could miss that
// Append. At a workload's end nothing else appends, so the wait is short.
type countingStore struct {
	store.EventStore
	appends atomic.Int64 // successful Append calls
	events  atomic.Int64 // events those calls carried

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops
	inflight int        // Append calls not yet returned
}

var (
	_ store.EventStore  = (*countingStore)(nil)
	_ store.Subscriber  = (*countingStore)(nil)
	_ store.RangeReader = (*countingStore)(nil)
)

// errNoCapability is returned when the decorated store lacks a capability
// the decorator forwards.
var errNoCapability = errors.New("bench: the decorated store lacks this capability")

// Append counts the call once the store has acknowledged it.
func (s *countingStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	err := s.EventStore.Append(ctx, executionID, expected, events)
	if err == nil {
		s.appends.Add(1)
		s.events.Add(int64(len(events)))
	}
	s.mu.Lock()
	s.inflight--
	if s.idle != nil {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	return err
}

// Subscribe forwards store.Subscriber.
func (s *countingStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	sub, ok := s.EventStore.(store.Subscriber)
	if !ok {
		return nil, errNoCapability
	}
	return sub.Subscribe(ctx, executionID, from)
}

// ReadRange forwards store.RangeReader (store.ReadRange falls back to
// ReadFrom when the decorated store has none).
func (s *countingStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	return store.ReadRange(ctx, s.EventStore, executionID, from, to)
}

// counts is a reading of the counters.
type counts struct{ appends, events int64 }

// read takes the counters once no Append is in flight.
func (s *countingStore) read() counts {
	s.mu.Lock()
	if s.idle == nil {
		s.idle = sync.NewCond(&s.mu)
	}
	for s.inflight > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	return counts{appends: s.appends.Load(), events: s.events.Load()}
}

// minus is what was counted between reading o and reading c.
func (c counts) minus(o counts) counts {
	return counts{appends: c.appends - o.appends, events: c.events - o.events}
}

// countingSnapshots decorates a snapshot store and counts the snapshots the
// runtime loads. A resume that replays loads the latest one first; one
// answered in place by a sticky park loads none: the count tells workload d
// which path each resume took.
type countingSnapshots struct {
	store.SnapshotStore
	loads atomic.Int64 // LoadLatest and LoadAt calls
}

var _ store.SnapshotStore = (*countingSnapshots)(nil)

// LoadLatest counts the call and forwards it.
func (s *countingSnapshots) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	s.loads.Add(1)
	return s.SnapshotStore.LoadLatest(ctx, executionID)
}

// LoadAt counts the call and forwards it.
func (s *countingSnapshots) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	s.loads.Add(1)
	return s.SnapshotStore.LoadAt(ctx, executionID, atMost)
}
