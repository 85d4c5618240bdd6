package memstore

import (
	"bytes"
	"context"
	"sort"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// Interface checks: the SnapshotStore implements every SnapshotStore capability.
var (
	_ store.SnapshotStore   = (*SnapshotStore)(nil)
	_ store.SnapshotLister  = (*SnapshotStore)(nil)
	_ store.SnapshotPruner  = (*SnapshotStore)(nil)
	_ store.SnapshotDeleter = (*SnapshotStore)(nil)
)

// SnapshotStore is the in-memory store.SnapshotStore. Snapshots of one
// execution are kept sorted by sequence, so a load is a binary search. It is
// safe for concurrent use; build one with NewSnapshotStore.
type SnapshotStore struct {
	mu     sync.RWMutex
	closed bool
	byExec map[string][]store.Snapshot // ascending by Sequence, unique
}

// NewSnapshotStore returns an empty in-memory snapshot store.
func NewSnapshotStore() *SnapshotStore {
	return &SnapshotStore{byExec: make(map[string][]store.Snapshot)}
}

// Save stores a copy of snap, replacing a snapshot at the same sequence. It
// refuses an invalid execution id or a negative sequence with an
// *event.InvalidEnvelopeError, and a closed store with store.ErrClosed; a
// refused Save changes nothing.
func (s *SnapshotStore) Save(ctx context.Context, snap store.Snapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := event.ValidateID("executionId", snap.ExecutionID); err != nil {
		return err
	}
	if snap.Sequence < 0 {
		return &event.InvalidEnvelopeError{Field: "sequence", Reason: "negative"}
	}
	snap.State = bytes.Clone(snap.State)
	snaps := s.byExec[snap.ExecutionID]
	i := sort.Search(len(snaps), func(i int) bool { return snaps[i].Sequence >= snap.Sequence })
	if i < len(snaps) && snaps[i].Sequence == snap.Sequence {
		snaps[i] = snap
		return nil
	}
	snaps = append(snaps, store.Snapshot{})
	copy(snaps[i+1:], snaps[i:])
	snaps[i] = snap
	s.byExec[snap.ExecutionID] = snaps
	return nil
}

// LoadLatest returns a copy of the snapshot of executionID with the highest
// sequence, or false when it has none.
func (s *SnapshotStore) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, func(snaps []store.Snapshot) int { return len(snaps) - 1 })
}

// LoadAt returns a copy of the snapshot of executionID with the highest
// sequence <= atMost, or false when there is none (no snapshot at all, or
// atMost below the first one).
func (s *SnapshotStore) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	return s.load(ctx, executionID, func(snaps []store.Snapshot) int {
		return sort.Search(len(snaps), func(i int) bool { return snaps[i].Sequence > atMost }) - 1
	})
}

// load returns a copy of the snapshot at the index pick chooses (-1: none).
func (s *SnapshotStore) load(ctx context.Context, executionID string, pick func([]store.Snapshot) int) (store.Snapshot, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Snapshot{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Snapshot{}, false, store.ErrClosed
	}
	snaps := s.byExec[executionID]
	i := pick(snaps)
	if i < 0 || i >= len(snaps) {
		return store.Snapshot{}, false, nil
	}
	out := snaps[i]
	out.State = bytes.Clone(out.State)
	return out, true, nil
}

// ListSequences returns the snapshot sequences of executionID, ascending;
// none for an unknown execution.
func (s *SnapshotStore) ListSequences(ctx context.Context, executionID string) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	snaps := s.byExec[executionID]
	out := make([]int64, len(snaps))
	for i, sn := range snaps {
		out[i] = sn.Sequence
	}
	return out, nil
}

// Prune deletes the snapshots of executionID with sequence < below and
// returns how many it deleted; the caller decides what is safe to remove.
func (s *SnapshotStore) Prune(ctx context.Context, executionID string, below int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, store.ErrClosed
	}
	snaps := s.byExec[executionID]
	n := sort.Search(len(snaps), func(i int) bool { return snaps[i].Sequence >= below })
	if n == 0 {
		return 0, nil
	}
	if n == len(snaps) {
		delete(s.byExec, executionID)
		return n, nil
	}
	s.byExec[executionID] = append([]store.Snapshot(nil), snaps[n:]...)
	return n, nil
}

// DeleteExecution removes every snapshot of executionID; deleting an
// execution without snapshots is not an error.
func (s *SnapshotStore) DeleteExecution(ctx context.Context, executionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	delete(s.byExec, executionID)
	return nil
}

// Close marks the store closed and drops its contents. The first Close
// returns nil; every later call of any method returns store.ErrClosed.
func (s *SnapshotStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.byExec = nil
	return nil
}
