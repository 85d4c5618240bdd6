package memstore

import (
	"slices"
	"sort"
)

// executionIndex keeps the execution ids of an EventStore in code-point
// order for ListExecutions without sorting the whole set per page.
//
// New ids go to pending in O(1); the next listing sorts only pending and
// merges it into sorted in one linear pass, dropping ids that are no longer
// live (deleted) and duplicates (an id deleted and created again before the
// merge). A page is then a binary search plus a scan of its own length.
// The index is guarded by the EventStore's mutex: add and markDirty under the
// write lock, refresh under the write lock, page reads under either lock.
type executionIndex struct {
	sorted  []string // ascending, no duplicates after refresh
	pending []string // ids created since the last refresh, unordered
	dirty   bool     // pending is non-empty or an id was deleted
}

// add records a newly created execution id.
func (x *executionIndex) add(id string) {
	x.pending = append(x.pending, id)
	x.dirty = true
}

// markDirty records that an id was deleted, so the next refresh compacts.
func (x *executionIndex) markDirty() { x.dirty = true }

// refresh merges pending into sorted, keeping only ids for which live
// reports true. It costs O(n + k log k) for n indexed and k pending ids.
func (x *executionIndex) refresh(live func(id string) bool) {
	if !x.dirty {
		return
	}
	slices.Sort(x.pending)
	merged := make([]string, 0, len(x.sorted)+len(x.pending))
	keep := func(id string) {
		if n := len(merged); n > 0 && merged[n-1] == id {
			return
		}
		if live(id) {
			merged = append(merged, id)
		}
	}
	i, j := 0, 0
	for i < len(x.sorted) || j < len(x.pending) {
		switch {
		case j == len(x.pending) || (i < len(x.sorted) && x.sorted[i] <= x.pending[j]):
			keep(x.sorted[i])
			i++
		default:
			keep(x.pending[j])
			j++
		}
	}
	x.sorted = merged
	x.pending = x.pending[:0]
	x.dirty = false
}

// page returns up to limit live ids that sort after after, and whether a
// live id follows the last one returned. Callers refresh first; ids that
// died since (a concurrent delete) are skipped.
func (x *executionIndex) page(after string, limit int, live func(id string) bool) ([]string, bool) {
	start := sort.Search(len(x.sorted), func(i int) bool { return x.sorted[i] > after })
	var ids []string
	for i := start; i < len(x.sorted); i++ {
		id := x.sorted[i]
		if !live(id) {
			continue
		}
		if len(ids) == limit {
			return ids, true
		}
		ids = append(ids, id)
	}
	return ids, false
}
