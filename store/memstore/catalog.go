package memstore

import (
	"context"
	"slices"

	"github.com/loom-kernel/loom/store"
)

var _ store.ExecutionCatalog = (*EventStore)(nil)

// catalogKey is an entry's place in the catalog's order, which never
// changes once the entry exists.
type catalogKey struct {
	started int64
	id      string
}

func (k catalogKey) compare(o catalogKey) int {
	switch {
	case k.started > o.started:
		return -1
	case k.started < o.started:
		return 1
	}
	switch {
	case k.id < o.id:
		return -1
	case k.id > o.id:
		return 1
	}
	return 0
}

// catalogIndex is the EventStore's store.ExecutionCatalog order: the keys
// of every cataloged log, newest start first, guarded by the store's
// mutex. An entry's key never moves, so an insert is a binary search and
// a deletion marks the order dirty, merged before the next search.
type catalogIndex struct {
	order []catalogKey
	dirty bool
}

// add inserts the key of a new entry.
func (x *catalogIndex) add(k catalogKey) {
	i, found := slices.BinarySearchFunc(x.order, k, catalogKey.compare)
	if !found {
		x.order = slices.Insert(x.order, i, k)
	}
}

// refresh drops the keys of logs that are gone or no longer hold that
// entry. Callers hold the write lock.
func (x *catalogIndex) refresh(logs map[string]*execLog) {
	x.order = slices.DeleteFunc(x.order, func(k catalogKey) bool {
		l := logs[k.id]
		return l == nil || !l.cataloged || l.entry.StartedAt != k.started
	})
	x.dirty = false
}

// catalog records the entry of a log from its first batch (created) and
// moves it by the batch's status change. Callers hold the write lock and
// have left inbox streams out.
func (s *EventStore) catalog(executionID string, log *execLog, change store.CatalogChange, created bool) {
	if created {
		log.entry = store.EntryOf(executionID, log.events[0])
		log.entry.WorkflowID = log.workflowID
		log.cataloged = true
		s.cat.add(catalogKey{log.entry.StartedAt, executionID})
	}
	log.entry = log.entry.Apply(change)
}

// SearchExecutions implements store.ExecutionCatalog: one page of the
// entries q selects, newest start first, from the ordered index (a binary
// search to the cursor, then a walk until the page is full).
func (s *EventStore) SearchExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogPage, error) {
	if err := store.ValidateCatalogQuery(q); err != nil {
		return store.CatalogPage{}, err
	}
	if err := s.usable(ctx); err != nil {
		return store.CatalogPage{}, err
	}
	limit := store.CatalogLimit(q.Limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.CatalogPage{}, store.ErrClosed
	}
	if s.cat.dirty {
		s.cat.refresh(s.logs)
	}
	from := 0
	if q.After != "" {
		started, id, _ := store.ParseCatalogCursor(q.After) // valid: checked above
		from, _ = slices.BinarySearchFunc(s.cat.order, catalogKey{started, id}, catalogKey.compare)
		if from < len(s.cat.order) && s.cat.order[from] == (catalogKey{started, id}) {
			from++
		}
	}
	page := store.CatalogPage{Entries: []store.CatalogEntry{}}
	for _, k := range s.cat.order[from:] {
		e := s.logs[k.id].entry
		if !q.Matches(e) {
			continue
		}
		if len(page.Entries) == limit {
			page.Next = store.CatalogCursor(page.Entries[limit-1])
			break
		}
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}

// CountExecutions implements store.ExecutionCatalog by a pass over the
// cataloged logs.
func (s *EventStore) CountExecutions(ctx context.Context, q store.CatalogQuery) (store.CatalogCounts, error) {
	q.Status, q.After, q.Limit = "", "", 0
	if err := store.ValidateCatalogQuery(q); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	counts := store.CatalogCounts{}
	for _, l := range s.logs { //loom:order-independent a count
		if l.cataloged && q.Matches(l.entry) {
			counts[l.entry.Status]++
		}
	}
	return counts, nil
}
