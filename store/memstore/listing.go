package memstore

import (
	"context"

	"github.com/loom-kernel/loom/store"
)

// ListExecutions returns up to limit executions whose id sorts after after
// in code-point order (Go string order, the byte order of UTF-8), with their
// length and workflow id (that of the first event appended with one). Next is the id of the last execution returned when
// more follow, and "" on the last page, so a full final page never needs an
// extra empty one. A limit <= 0 means DefaultListLimit. Executions created
// while a caller pages through the listing appear iff they sort after its
// cursor.
func (s *EventStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := s.usable(ctx); err != nil {
		return store.ExecutionPage{}, err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	s.mu.RLock()
	if s.index.dirty {
		// Merging the index needs the write lock; take it for this page only.
		s.mu.RUnlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed.Load() {
			return store.ExecutionPage{}, store.ErrClosed
		}
		s.index.refresh(s.isLive)
	} else {
		defer s.mu.RUnlock()
		if s.closed.Load() {
			return store.ExecutionPage{}, store.ErrClosed
		}
	}
	ids, more := s.index.page(after, limit, s.isLive)
	page := store.ExecutionPage{Executions: make([]store.ExecutionInfo, 0, len(ids))}
	for _, id := range ids {
		log := s.logs[id]
		page.Executions = append(page.Executions, store.ExecutionInfo{
			ExecutionID: id,
			WorkflowID:  log.workflowID,
			Length:      int64(len(log.events)),
		})
	}
	if more {
		page.Next = ids[len(ids)-1]
	}
	return page, nil
}

// isLive reports whether id has a log with events. Callers hold mu.
func (s *EventStore) isLive(id string) bool {
	log, ok := s.logs[id]
	return ok && len(log.events) > 0
}
