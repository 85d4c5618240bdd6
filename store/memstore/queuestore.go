package memstore

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/loom-kernel/loom/store"
)

var _ store.QueueStore = (*QueueStore)(nil)

// QueueStore is the in-memory store.QueueStore; build one with
// NewQueueStore. It is safe for concurrent use: one mutex serialises every
// call, so a Claim's limit checks and its grant are one step that no other
// Claim sees half done.
//
// Cost, for n items of a queue: Enqueue, Renew, Complete and Release are
// O(1); Claim, ReadyTenants and Depth scan the queue, O(n log n) for Claim
// (it sorts the ready items). Done items stay, as the idempotency record of
// their ExecutionID, until the store is dropped.
type QueueStore struct {
	mu     sync.Mutex
	closed bool
	queues map[string]*memQueue
}

// memQueue is one queue's items and, for Rate, the times of its recent
// claims.
type memQueue struct {
	items map[string]*queueEntry // by ExecutionID
	// claimTimes holds the ClaimedAt of the claims made under a Rate limit,
	// pruned to the window on every such claim (every caller passes the
	// same limits, so no other window needs older times).
	claimTimes []int64
}

// queueEntry is one item and its current claim, if any.
type queueEntry struct {
	item store.QueueItem // Input and Meta are the store's own copies
	done bool
	// held is true from a claim to its Complete or Release; the claim is
	// live while held and expiresAt is after the time asked.
	held      bool
	owner     string
	claimedAt int64
	expiresAt int64
	// attempt counts the claims so far; it is also the current claim's
	// Token, so every claim of the item has a greater one.
	attempt int
}

// NewQueueStore returns an empty in-memory queue store.
func NewQueueStore() *QueueStore {
	return &QueueStore{queues: make(map[string]*memQueue)}
}

// Enqueue implements store.QueueStore: it stores a copy of item and
// reports true, or reports false and changes nothing when the queue holds
// item.ExecutionID already, done or not. It refuses what
// store.ValidateQueueItem refuses, storing nothing.
func (s *QueueStore) Enqueue(ctx context.Context, item store.QueueItem) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.ValidateQueueItem(item); err != nil {
		return false, err
	}
	item.Input, item.Meta = clonePayload(item.Input), clonePayload(item.Meta)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, store.ErrClosed
	}
	q := s.queues[item.Queue]
	if q == nil {
		q = &memQueue{items: make(map[string]*queueEntry)}
		s.queues[item.Queue] = q
	}
	if _, ok := q.items[item.ExecutionID]; ok {
		return false, nil
	}
	q.items[item.ExecutionID] = &queueEntry{item: item}
	return true, nil
}

// Claim implements store.QueueStore: under the store's lock it counts the
// queue's live claims at req.Now, then grants ready items in priority order
// while every limit allows, skipping an item whose partition is full. It
// refuses what store.ValidateClaimRequest refuses, claiming nothing.
func (s *QueueStore) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateClaimRequest(req); err != nil {
		return nil, err
	}
	if req.Now > math.MaxInt64-req.TTL {
		return nil, &store.QueueLimitsError{Field: "TTL", Problem: "overflows Now+TTL"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	q := s.queues[req.Queue]
	if q == nil {
		return nil, nil
	}
	budget := q.budget(req)
	var ready []*queueEntry
	for _, e := range q.items {
		if e.ready(req.Now) && (req.Tenant == "" || e.item.Tenant == req.Tenant) {
			ready = append(ready, e)
		}
	}
	slices.SortFunc(ready, func(a, b *queueEntry) int { return compareItems(a.item, b.item) })
	var out []store.Claim
	for _, e := range ready {
		if len(out) == req.Max || budget.exhausted() {
			break
		}
		if !budget.take(e.item.PartitionKey) {
			continue // its partition is full; a later item's may not be
		}
		e.held, e.owner, e.claimedAt, e.expiresAt = true, req.Owner, req.Now, req.Now+req.TTL
		e.attempt++
		out = append(out, e.claim())
		if req.Limits.Rate > 0 {
			q.claimTimes = append(q.claimTimes, req.Now)
		}
	}
	return out, nil
}

// budget counts what req's limits still allow in q at req.Now, pruning the
// claim times a Rate limit no longer needs.
func (q *memQueue) budget(req store.ClaimRequest) *claimBudget {
	b := &claimBudget{limits: req.Limits, partitions: make(map[string]int)}
	for _, e := range q.items {
		if !e.live(req.Now) {
			continue
		}
		b.live++
		if e.owner == req.Owner {
			b.owner++
		}
		if e.item.PartitionKey != "" {
			b.partitions[e.item.PartitionKey]++
		}
	}
	if req.Limits.Rate > 0 {
		q.claimTimes = slices.DeleteFunc(q.claimTimes, func(at int64) bool { return at <= req.Now-req.Limits.RateWindow })
		for _, at := range q.claimTimes {
			if at <= req.Now {
				b.rate++
			}
		}
	}
	return b
}

// claimBudget is the live claims one Claim counts against its limits.
type claimBudget struct {
	limits     store.QueueLimits
	live       int // live claims of the queue
	owner      int // live claims of the owner
	rate       int // claims in the rate window
	partitions map[string]int
}

// exhausted reports whether a limit other than PerPartition allows no
// further claim.
func (b *claimBudget) exhausted() bool {
	l := b.limits
	return (l.Concurrency > 0 && b.live >= l.Concurrency) || (l.PerOwner > 0 && b.owner >= l.PerOwner) ||
		(l.Rate > 0 && b.rate >= l.Rate)
}

// take counts one more claim in partition and reports true, or reports
// false, counting nothing, when the partition is full; the caller has
// checked exhausted.
func (b *claimBudget) take(partition string) bool {
	if partition != "" && b.limits.PerPartition > 0 && b.partitions[partition] >= b.limits.PerPartition {
		return false
	}
	b.live++
	b.owner++
	b.rate++
	if partition != "" {
		b.partitions[partition]++
	}
	return true
}

// compareItems orders items as Claim hands them out: higher Priority
// first, then EnqueuedAt, then ExecutionID.
func compareItems(a, b store.QueueItem) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.EnqueuedAt, b.EnqueuedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ExecutionID, b.ExecutionID)
}

// Renew implements store.QueueStore: it moves a live claim's expiry to
// now+ttl, keeping its Token, Attempt and ClaimedAt. A claim that is not
// the item's current one (by Token and Owner), or that expired at now, is
// refused with store.ErrClaimLost; a ttl below 1 with
// *store.QueueLimitsError.
func (s *QueueStore) Renew(ctx context.Context, c store.Claim, now, ttl int64) (store.Claim, error) {
	if err := ctx.Err(); err != nil {
		return store.Claim{}, err
	}
	if ttl < 1 || now > math.MaxInt64-ttl {
		return store.Claim{}, &store.QueueLimitsError{Field: "TTL", Problem: "must be positive, and now+ttl must fit int64"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.current(c)
	if err != nil {
		return store.Claim{}, err
	}
	if !e.live(now) {
		return store.Claim{}, store.ErrClaimLost
	}
	e.expiresAt = now + ttl
	return e.claim(), nil
}

// Complete implements store.QueueStore: it marks the item done iff c is
// its current claim (by Token and Owner); otherwise store.ErrClaimLost.
// Complete takes no time, so a claim that expired but was not taken over
// still completes.
func (s *QueueStore) Complete(ctx context.Context, c store.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.current(c)
	if err != nil {
		return err
	}
	e.done, e.held = true, false
	return nil
}

// Release implements store.QueueStore: the item is ready at once iff c is
// its current claim (by Token and Owner); otherwise store.ErrClaimLost.
// The claim still counts toward a Rate window.
func (s *QueueStore) Release(ctx context.Context, c store.Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.current(c)
	if err != nil {
		return err
	}
	e.held = false
	return nil
}

// current returns the entry c claims iff c is its current claim; the
// caller holds s.mu.
func (s *QueueStore) current(c store.Claim) (*queueEntry, error) {
	if s.closed {
		return nil, store.ErrClosed
	}
	q := s.queues[c.Item.Queue]
	if q == nil {
		return nil, store.ErrClaimLost
	}
	e := q.items[c.Item.ExecutionID]
	if e == nil || e.done || !e.held || int64(e.attempt) != c.Token || e.owner != c.Owner {
		return nil, store.ErrClaimLost
	}
	return e, nil
}

// ReadyTenants implements store.QueueStore: the distinct non-empty tenants
// of queue's items ready at now, sorted.
func (s *QueueStore) ReadyTenants(ctx context.Context, queue string, now int64) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	q := s.queues[queue]
	if q == nil {
		return nil, nil
	}
	var out []string
	for _, e := range q.items {
		if e.item.Tenant != "" && e.ready(now) {
			out = append(out, e.item.Tenant)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Depth implements store.QueueStore: queue's items at now, by state.
func (s *QueueStore) Depth(ctx context.Context, queue string, now int64) (store.QueueDepth, error) {
	if err := ctx.Err(); err != nil {
		return store.QueueDepth{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.QueueDepth{}, store.ErrClosed
	}
	var d store.QueueDepth
	if q := s.queues[queue]; q != nil {
		for _, e := range q.items {
			switch {
			case e.done:
				d.Done++
			case e.live(now):
				d.Claimed++
			default:
				d.Ready++
			}
		}
	}
	return d, nil
}

// Close marks the store closed and drops its items. The first Close
// returns nil; every later call of any method returns store.ErrClosed.
func (s *QueueStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed, s.queues = true, nil
	return nil
}

// live reports whether the entry holds a live claim at now.
func (e *queueEntry) live(now int64) bool { return !e.done && e.held && now < e.expiresAt }

// ready reports whether the entry may be claimed at now.
func (e *queueEntry) ready(now int64) bool { return !e.done && !e.live(now) }

// claim returns the entry's current claim, with an item the caller may
// mutate.
func (e *queueEntry) claim() store.Claim {
	item := e.item
	item.Input, item.Meta = clonePayload(item.Input), clonePayload(item.Meta)
	return store.Claim{Item: item, Owner: e.owner, Token: int64(e.attempt), ClaimedAt: e.claimedAt,
		ExpiresAt: e.expiresAt, Attempt: e.attempt}
}
