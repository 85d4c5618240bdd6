package memstore

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"sync"

	"github.com/loom-kernel/loom/store"
)

// DefaultDueLimit is how many timers Due returns at most when its limit is
// below 1.
const DefaultDueLimit = 1000

var (
	_ store.TimerStore   = (*TimerStore)(nil)
	_ store.TimerClaimer = (*TimerStore)(nil)
)

// TimerStore is the in-memory store.TimerStore; build one with
// NewTimerStore. It is safe for concurrent use: Put, Delete and ClaimDue
// hold the write lock, Get and Due the read lock, so pollers may call Due
// at once.
//
// Cost, for n stored timers: Put and Delete are O(log n), Get is O(1), and
// Due of k timers is O(k log k), whatever n is and however many are due.
// Timers sit in a binary min-heap ordered by (WakeAt, Key) that tracks each
// timer's position, so a replaced or deleted timer is fixed or removed in
// place (no lazy deletion, no tombstones to compact). Due does not pop the
// heap: it walks it best-first from the root, keeping a frontier of the
// children of what it has returned. A heap node is never smaller than its
// parent, so the smallest unreturned timer is always in the frontier, which
// grows by at most one node per timer returned: k timers cost k+1 frontier
// pops and at most 2k pushes on a frontier of at most k+1 nodes. Nothing is
// ever sorted, and the heap is only read, so Due needs just the read lock.
type TimerStore struct {
	mu     sync.RWMutex
	closed bool
	byKey  map[string]*timerEntry
	order  timerHeap
}

// timerEntry is one stored timer and its position in the heap.
type timerEntry struct {
	t   store.Timer // Payload is the store's own copy, nil when absent
	pos int
	// claimedUntil is when ClaimDue's claim of the timer ends (0: never
	// claimed); Put resets it.
	claimedUntil int64
}

// NewTimerStore returns an empty in-memory timer store.
func NewTimerStore() *TimerStore {
	return &TimerStore{byKey: make(map[string]*timerEntry)}
}

// Put stores a copy of t under t.Key, replacing any timer with that key
// (its wake time, execution id and payload alike). Before anything is
// stored it refuses, with the *event.InvalidEnvelopeError of
// event.ValidateID, an invalid key or a non-empty invalid execution id, and
// a payload that is neither empty nor valid UTF-8 JSON (an
// *event.InvalidEnvelopeError) or exceeds event.DefaultMaxPayloadBytes (an
// *event.PayloadTooLargeError); a refused Put changes nothing. An empty
// payload is stored as absent. A closed store returns store.ErrClosed.
func (s *TimerStore) Put(ctx context.Context, t store.Timer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateTimer(t); err != nil {
		return err
	}
	t.Payload = clonePayload(t.Payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if e, ok := s.byKey[t.Key]; ok {
		e.t, e.claimedUntil = t, 0
		heap.Fix(&s.order, e.pos)
		return nil
	}
	e := &timerEntry{t: t}
	s.byKey[t.Key] = e
	heap.Push(&s.order, e)
	return nil
}

// Get returns a copy of the timer under key, or false when there is none.
func (s *TimerStore) Get(ctx context.Context, key string) (store.Timer, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Timer{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.Timer{}, false, store.ErrClosed
	}
	e, ok := s.byKey[key]
	if !ok {
		return store.Timer{}, false, nil
	}
	return e.copy(), true, nil
}

// Due returns copies of up to limit timers with WakeAt <= now, ordered by
// WakeAt then Key (code-point order); DefaultDueLimit when limit < 1. It
// removes nothing: the caller deletes what it has fired.
func (s *TimerStore) Due(ctx context.Context, now int64, limit int) ([]store.Timer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 1 {
		limit = DefaultDueLimit
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	var out []store.Timer
	s.order.walk(now, limit, func(e *timerEntry) bool {
		out = append(out, e.copy())
		return true
	})
	return out, nil
}

// ClaimDue implements store.TimerClaimer: under the write lock it returns
// copies of up to limit due timers (WakeAt <= now) that no claim holds at
// now, ordered as Due orders them, and claims each for owner until
// now+ttl; DefaultDueLimit when limit < 1. A claim ends at its expiry, or
// when Delete removes the timer or Put replaces it. It refuses an owner
// event.ValidateID refuses, or a ttl below 1, with an
// *event.InvalidEnvelopeError. Claimed timers are skipped in place, so a
// call costs O((k+c) log(k+c)) for k timers returned past c claimed ones.
func (s *TimerStore) ClaimDue(ctx context.Context, owner string, now, ttl int64, limit int) ([]store.Timer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateTimerClaim(owner, now, ttl); err != nil {
		return nil, err
	}
	if limit < 1 {
		limit = DefaultDueLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	var out []store.Timer
	s.order.walk(now, limit, func(e *timerEntry) bool {
		if now < e.claimedUntil {
			return false
		}
		e.claimedUntil = now + ttl
		out = append(out, e.copy())
		return true
	})
	return out, nil
}

// Delete removes the timer under key iff its WakeAt is wakeAt and reports
// whether it did. A timer stored again under key with another wake time
// survives a Delete made with the old one, so a poller that fired a stale
// timer never drops its replacement; a missing key reports false.
func (s *TimerStore) Delete(ctx context.Context, key string, wakeAt int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, store.ErrClosed
	}
	e, ok := s.byKey[key]
	if !ok || e.t.WakeAt != wakeAt {
		return false, nil
	}
	heap.Remove(&s.order, e.pos)
	delete(s.byKey, key)
	return true, nil
}

// Close marks the store closed and drops its timers. The first Close
// returns nil; every later call of any method returns store.ErrClosed.
func (s *TimerStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.byKey, s.order = nil, nil
	return nil
}

// copy returns the timer with a payload the caller may mutate.
func (e *timerEntry) copy() store.Timer {
	t := e.t
	t.Payload = clonePayload(t.Payload)
	return t
}

// clonePayload copies p, and turns an empty payload into nil (absent).
func clonePayload(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	return bytes.Clone(p)
}

// timerHeap is a min-heap of timers by (WakeAt, Key) for container/heap;
// Swap keeps every entry's pos current so Fix and Remove work in place.
type timerHeap []*timerEntry

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool { return timerLess(h[i], h[j]) }

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

// Push appends x (a *timerEntry); container/heap then sifts it up.
func (h *timerHeap) Push(x any) {
	e := x.(*timerEntry)
	e.pos = len(*h)
	*h = append(*h, e)
}

// Pop removes the last entry, which container/heap has swapped there.
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil // let the entry be collected
	*h = old[:len(old)-1]
	return e
}

// timerLess orders timers by WakeAt, then Key (keys are unique).
func timerLess(a, b *timerEntry) bool {
	if a.t.WakeAt != b.t.WakeAt {
		return a.t.WakeAt < b.t.WakeAt
	}
	return a.t.Key < b.t.Key
}

// walk visits, in (WakeAt, Key) order and without changing h's order, the
// entries with WakeAt <= now until visit has taken limit of them (visit
// reports whether it took the entry). frontier is a min-heap of positions in h whose
// parents have been visited; the smallest unvisited entry is always in it.
func (h timerHeap) walk(now int64, limit int, visit func(*timerEntry) bool) {
	if len(h) == 0 {
		return
	}
	f := frontier{h: h, idx: make([]int, 1, min(limit, len(h))+1)}
	for n := 0; n < limit && len(f.idx) > 0; {
		i := f.pop()
		if h[i].t.WakeAt > now {
			return // every entry left is at or after this one
		}
		if visit(h[i]) {
			n++
		}
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) {
				f.push(c)
			}
		}
	}
}

// frontier is a binary min-heap of positions in h, ordered by their entries.
type frontier struct {
	h   timerHeap
	idx []int
}

func (f *frontier) less(a, b int) bool { return timerLess(f.h[f.idx[a]], f.h[f.idx[b]]) }

func (f *frontier) push(i int) {
	f.idx = append(f.idx, i)
	for c := len(f.idx) - 1; c > 0; {
		p := (c - 1) / 2
		if !f.less(c, p) {
			break
		}
		f.idx[c], f.idx[p] = f.idx[p], f.idx[c]
		c = p
	}
}

func (f *frontier) pop() int {
	top := f.idx[0]
	last := len(f.idx) - 1
	f.idx[0] = f.idx[last]
	f.idx = f.idx[:last]
	for p := 0; ; {
		c := 2*p + 1
		if c >= last {
			break
		}
		if c+1 < last && f.less(c+1, c) {
			c++
		}
		if !f.less(c, p) {
			break
		}
		f.idx[c], f.idx[p] = f.idx[p], f.idx[c]
		p = c
	}
	return top
}
