package memstore

import (
	"context"
	"sort"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

var (
	_ store.ArchiveStore   = (*ArchiveStore)(nil)
	_ store.ArchiveDeleter = (*ArchiveStore)(nil)
)

// ArchiveStore is the in-memory store.ArchiveStore; build one with
// NewArchiveStore. It is safe for concurrent use.
type ArchiveStore struct {
	mu     sync.RWMutex
	closed bool
	logs   map[string]map[int64]event.Envelope // execution -> sequence -> event
}

// NewArchiveStore returns an empty in-memory archive.
func NewArchiveStore() *ArchiveStore {
	return &ArchiveStore{logs: map[string]map[int64]event.Envelope{}}
}

// Archive implements store.ArchiveStore: the batch is checked
// (store.ValidateArchive) and compared with what is archived, then stored
// whole, under the write lock.
func (s *ArchiveStore) Archive(ctx context.Context, executionID string, events []event.Envelope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateArchive(executionID, events, event.Limits{}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	held := s.logs[executionID]
	for _, e := range events {
		if prev, ok := held[e.Sequence]; ok && !store.SameArchived(prev, e) {
			return &store.ArchiveConflictError{ExecutionID: executionID, Sequence: e.Sequence}
		}
	}
	if held == nil && len(events) > 0 {
		held = map[int64]event.Envelope{}
		s.logs[executionID] = held
	}
	for _, e := range events {
		if _, ok := held[e.Sequence]; !ok {
			held[e.Sequence] = cloneEnvelope(e)
		}
	}
	return nil
}

// ReadArchived implements store.ArchiveStore.
func (s *ArchiveStore) ReadArchived(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	var out []event.Envelope
	for seq, e := range s.logs[executionID] { //loom:sorted below
		if seq >= from && (to < 0 || seq < to) {
			out = append(out, cloneEnvelope(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out, nil
}

// DeleteArchived implements store.ArchiveDeleter.
func (s *ArchiveStore) DeleteArchived(ctx context.Context, executionID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	delete(s.logs, executionID)
	return nil
}

// Close drops the archive; later calls fail with store.ErrClosed.
func (s *ArchiveStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed, s.logs = true, nil
	return nil
}
