package memstore

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

var _ store.ReadModelStore = (*ReadModelStore)(nil)

// ReadModelStore is the in-memory store.ReadModelStore; build one with
// NewReadModelStore. It is safe for concurrent use: Apply and Reset run
// under the write lock, so each is atomic and the compare-and-sets of
// concurrent Applies are decided one at a time.
//
// Rows of a kind are kept in an ordered index of ids, and each (kind,
// field name, value) has an ordered posting list of the ids holding it, so
// a Query walks the shortest posting list of its Where from its cursor (a
// binary search) and checks the other pairs on each row it meets: it never
// visits a row that lacks that pair. Sources of a projection are kept
// ordered the same way for Watermarks.
type ReadModelStore struct {
	mu     sync.RWMutex
	closed bool
	rows   map[rowKey]*modelRow
	kinds  map[string]*kindIndex
	owned  map[string]map[rowKey]struct{} // projection -> the rows it wrote
	marks  map[string]*projectionMarks    // projection -> its watermarks
}

// rowKey is a row's key.
type rowKey struct{ kind, id string }

// modelRow is a stored row; its maps and bytes are the store's own.
type modelRow struct {
	projection string
	version    int64
	fields     map[string]string
	doc        []byte
}

// fieldKey is one indexed (name, value) pair of a kind.
type fieldKey struct{ name, value string }

// kindIndex orders the ids of one kind, all and per field pair.
type kindIndex struct {
	ids      sortedIDs
	postings map[fieldKey]*sortedIDs
}

// projectionMarks are the watermarks of one projection.
type projectionMarks struct {
	sources sortedIDs
	seq     map[string]int64
}

// NewReadModelStore returns an empty in-memory read-model store.
func NewReadModelStore() *ReadModelStore {
	return &ReadModelStore{rows: map[rowKey]*modelRow{}, kinds: map[string]*kindIndex{},
		owned: map[string]map[rowKey]struct{}{}, marks: map[string]*projectionMarks{}}
}

// Apply implements store.ReadModelStore: the call is checked
// (store.ValidateReadModelApply, under the default limits), then, under the
// write lock, the watermark and every write are checked in
// store.SortReadModelWrites order and, when all pass, applied together.
func (s *ReadModelStore) Apply(ctx context.Context, projection, source string, from, to int64, writes []store.ReadModelWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateReadModelApply(projection, source, from, to, writes, event.Limits{}); err != nil {
		return err
	}
	sorted := store.SortReadModelWrites(writes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := store.CheckWatermark(projection, source, from, s.watermark(projection, source)); err != nil {
		return err
	}
	for _, w := range sorted {
		owner, version := "", int64(0)
		if r, ok := s.rows[rowKey{w.Row.Kind, w.Row.ID}]; ok {
			owner, version = r.projection, r.version
		}
		if err := store.CheckReadModelWrite(projection, w, owner, version); err != nil {
			return err
		}
	}
	for _, w := range sorted {
		k := rowKey{w.Row.Kind, w.Row.ID}
		if w.Delete {
			s.remove(k)
			continue
		}
		s.put(k, &modelRow{projection: projection, version: w.ExpectVersion + 1,
			fields: maps.Clone(w.Row.Fields), doc: slices.Clone(w.Row.Doc)})
	}
	m := s.marks[projection]
	if m == nil {
		m = &projectionMarks{seq: map[string]int64{}}
		s.marks[projection] = m
	}
	if _, ok := m.seq[source]; !ok {
		m.sources.insert(source)
	}
	m.seq[source] = to
	return nil
}

// watermark returns the stored watermark, NoWatermark when there is none.
// Callers hold mu.
func (s *ReadModelStore) watermark(projection, source string) int64 {
	if m := s.marks[projection]; m != nil {
		if seq, ok := m.seq[source]; ok {
			return seq
		}
	}
	return store.NoWatermark
}

// put stores r under k, replacing a row there and moving its index
// entries. Callers hold the write lock.
func (s *ReadModelStore) put(k rowKey, r *modelRow) {
	x := s.kinds[k.kind]
	if x == nil {
		x = &kindIndex{postings: map[fieldKey]*sortedIDs{}}
		s.kinds[k.kind] = x
	}
	var before map[string]string // the replaced row's fields
	if old, ok := s.rows[k]; ok {
		before = old.fields
	} else {
		x.ids.insert(k.id)
	}
	for _, name := range store.SortedFieldNames(before) {
		if v, ok := r.fields[name]; !ok || v != before[name] {
			x.unpost(fieldKey{name, before[name]}, k.id)
		}
	}
	for _, name := range store.SortedFieldNames(r.fields) {
		if v, ok := before[name]; !ok || v != r.fields[name] {
			x.post(fieldKey{name, r.fields[name]}, k.id)
		}
	}
	s.rows[k] = r
	own := s.owned[r.projection]
	if own == nil {
		own = map[rowKey]struct{}{}
		s.owned[r.projection] = own
	}
	own[k] = struct{}{}
}

// remove deletes the row under k, if any, with its index entries.
// Callers hold the write lock.
func (s *ReadModelStore) remove(k rowKey) {
	r, ok := s.rows[k]
	if !ok {
		return
	}
	x := s.kinds[k.kind]
	for _, name := range store.SortedFieldNames(r.fields) {
		x.unpost(fieldKey{name, r.fields[name]}, k.id)
	}
	x.ids.remove(k.id)
	if len(x.ids) == 0 {
		delete(s.kinds, k.kind)
	}
	delete(s.rows, k)
	if own := s.owned[r.projection]; own != nil {
		delete(own, k)
		if len(own) == 0 {
			delete(s.owned, r.projection)
		}
	}
}

// post adds id to the posting list of f.
func (x *kindIndex) post(f fieldKey, id string) {
	p := x.postings[f]
	if p == nil {
		p = &sortedIDs{}
		x.postings[f] = p
	}
	p.insert(id)
}

// unpost removes id from the posting list of f, dropping an emptied list.
func (x *kindIndex) unpost(f fieldKey, id string) {
	if p := x.postings[f]; p != nil {
		p.remove(id)
		if len(*p) == 0 {
			delete(x.postings, f)
		}
	}
}

// Watermark implements store.ReadModelStore.
func (s *ReadModelStore) Watermark(ctx context.Context, projection, source string) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.NoWatermark, false, err
	}
	if err := store.ValidateWatermarkKey(projection, source); err != nil {
		return store.NoWatermark, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.NoWatermark, false, store.ErrClosed
	}
	seq := s.watermark(projection, source)
	return seq, seq != store.NoWatermark, nil
}

// Watermarks implements store.ReadModelStore: a binary search in the
// projection's ordered sources, then the page.
func (s *ReadModelStore) Watermarks(ctx context.Context, projection, after string, limit int) (store.WatermarkPage, error) {
	if err := ctx.Err(); err != nil {
		return store.WatermarkPage{}, err
	}
	if err := store.ValidateProjection(projection); err != nil {
		return store.WatermarkPage{}, err
	}
	if err := store.ValidateReadModelCursor(after); err != nil {
		return store.WatermarkPage{}, err
	}
	limit = store.ReadModelPageLimit(limit)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.WatermarkPage{}, store.ErrClosed
	}
	page := store.WatermarkPage{Watermarks: []store.Watermark{}}
	m := s.marks[projection]
	if m == nil {
		return page, nil
	}
	sources := m.sources.after(after)
	if len(sources) > limit {
		sources, page.Next = sources[:limit], sources[limit-1]
	}
	for _, src := range sources {
		page.Watermarks = append(page.Watermarks, store.Watermark{Projection: projection, Source: src, Sequence: m.seq[src]})
	}
	return page, nil
}

// Get implements store.ReadModelStore.
func (s *ReadModelStore) Get(ctx context.Context, kind, id string) (store.ReadModel, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.ReadModel{}, false, err
	}
	if err := store.ValidateReadModelKey(kind, id); err != nil {
		return store.ReadModel{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ReadModel{}, false, store.ErrClosed
	}
	r, ok := s.rows[rowKey{kind, id}]
	if !ok {
		return store.ReadModel{}, false, nil
	}
	return r.model(kind, id), true, nil
}

// model returns a copy of r as the caller sees it.
func (r *modelRow) model(kind, id string) store.ReadModel {
	m := store.ReadModel{Kind: kind, ID: id, Projection: r.projection, Doc: slices.Clone(r.doc), Version: r.version}
	if len(r.fields) > 0 {
		m.Fields = maps.Clone(r.fields)
	}
	return m
}

// Query implements store.ReadModelStore: it walks the shortest posting
// list of q.Where (or every id of the kind, for no Where) from q.After and
// keeps the rows holding every pair, up to the page and one more to know
// whether another page follows.
func (s *ReadModelStore) Query(ctx context.Context, q store.ReadModelQuery) (store.ReadModelPage, error) {
	if err := ctx.Err(); err != nil {
		return store.ReadModelPage{}, err
	}
	q, err := store.ValidateReadModelQuery(q)
	if err != nil {
		return store.ReadModelPage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ReadModelPage{}, store.ErrClosed
	}
	page := store.ReadModelPage{Rows: []store.ReadModel{}}
	x := s.kinds[q.Kind]
	if x == nil {
		return page, nil
	}
	names := store.SortedFieldNames(q.Where)
	walk := x.ids
	for _, name := range names {
		p := x.postings[fieldKey{name, q.Where[name]}]
		if p == nil {
			return page, nil
		}
		if len(*p) < len(walk) {
			walk = *p
		}
	}
	for _, id := range walk.after(q.After) {
		r := s.rows[rowKey{q.Kind, id}]
		if !holds(r.fields, q.Where, names) {
			continue
		}
		if len(page.Rows) == q.Limit {
			page.Next = page.Rows[len(page.Rows)-1].ID
			break
		}
		page.Rows = append(page.Rows, r.model(q.Kind, id))
	}
	return page, nil
}

// holds reports whether fields has every pair of where (names: its keys).
func holds(fields, where map[string]string, names []string) bool {
	for _, name := range names {
		if v, ok := fields[name]; !ok || v != where[name] {
			return false
		}
	}
	return true
}

// Reset implements store.ReadModelStore, under the write lock.
func (s *ReadModelStore) Reset(ctx context.Context, projection string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateProjection(projection); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	for k := range s.owned[projection] { //loom:order-independent every row is removed
		s.remove(k)
	}
	delete(s.owned, projection)
	delete(s.marks, projection)
	return nil
}

// Close drops the store; later calls fail with store.ErrClosed.
func (s *ReadModelStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.rows, s.kinds, s.owned, s.marks = nil, nil, nil, nil
	return nil
}

// sortedIDs is an ascending set of strings in code-point order: inserts
// and removals cost a binary search and a copy, a page a binary search.
type sortedIDs []string

func (x *sortedIDs) insert(id string) {
	if i, found := slices.BinarySearch(*x, id); !found {
		*x = slices.Insert(*x, i, id)
	}
}

func (x *sortedIDs) remove(id string) {
	if i, found := slices.BinarySearch(*x, id); found {
		*x = slices.Delete(*x, i, i+1)
	}
}

// after returns the ids that sort after cursor ("" for all).
func (x sortedIDs) after(cursor string) sortedIDs {
	i, found := slices.BinarySearch(x, cursor)
	if found {
		i++
	}
	return x[i:]
}
