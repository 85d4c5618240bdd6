package dispatch

import (
	"slices"
	"strconv"
	"sync"
)

// MaxTenantWeight bounds a FairScheduler weight, so the scheduler's running
// sums stay far from overflow however many tenants are ready.
const MaxTenantWeight = 1_000_000

// Scheduler is the dispatch order of a Queue: which tenant the next claim
// is for. A Queue calls Pick with the tenants that have ready items, claims
// for the tenant picked, and reports what that claim got with Claimed, once
// per Pick, before the next Pick.
//
// A pick of a tenant is one item's turn: the Queue claims one item for it.
// A pick of "" claims any tenant's items, in the store's priority order, up
// to the free slots (FIFOScheduler). ok false claims nothing this round.
// A Queue calls its Scheduler from one goroutine at a time.
type Scheduler interface {
	// Pick chooses among ready (sorted, not empty, no duplicates).
	Pick(ready []string) (tenant string, ok bool)
	// Claimed reports that the claim for the last Pick's tenant got n
	// items; n == 0 means it found nothing (the tenant's ready items were
	// held back by a limit or claimed by another node), and the pick does
	// not count as the tenant's turn.
	Claimed(tenant string, n int)
}

// FIFOScheduler claims across tenants in the store's priority order
// (priority, then enqueue time, then execution id): a tenant that enqueues
// a thousand items ahead of another delays it by a thousand items. It is
// the Queue's default Scheduler; use NewFairScheduler to isolate tenants.
type FIFOScheduler struct{}

// Pick returns "" (any tenant) while any tenant is ready.
func (FIFOScheduler) Pick(ready []string) (string, bool) { return "", len(ready) > 0 }

// Claimed does nothing: FIFO keeps no state.
func (FIFOScheduler) Claimed(string, int) {}

// SchedulerError refuses a FairScheduler's weights: Tenant names the
// weight ("" for the default weight) and Reason says what to change.
type SchedulerError struct {
	Tenant string
	Weight int
	Reason string
}

func (e *SchedulerError) Error() string {
	what := "default weight"
	if e.Tenant != "" {
		what = "weight of tenant " + strconv.Quote(e.Tenant)
	}
	return "dispatch: scheduler " + what + " " + strconv.Itoa(e.Weight) + ": " + e.Reason
}

// FairScheduler is per-tenant smooth weighted round-robin: over any run of
// picks among the same ready tenants, each tenant gets turns in proportion
// to its weight, interleaved (weights 3:1 pick A A B A, never A A A B in a
// burst of three), so a tenant with ten items behind another's thousand
// waits about as many turns as it has items, times the number of ready
// tenants. It is deterministic: ties go to the tenant that sorts first,
// and no map is ever ranged over.
//
// Items without a tenant are not fair-scheduled: the store reads a claim
// for tenant "" as a claim for any tenant, so a pick cannot single them
// out. A Queue claims them with the slots its tenants' turns left free
// (see Queue.RunOnce), and Pick skips "" unless it is all that is ready.
// Give every item a tenant under a FairScheduler. A tenant that stops being ready loses its
// running credit (it starts afresh when it returns), so the state is
// bounded by the ready set. It is safe for concurrent use.
type FairScheduler struct {
	weights       map[string]int
	defaultWeight int

	mu      sync.Mutex
	current map[string]int64 // ready tenant → running credit
	last    pick
}

// pick is what Claimed needs to undo a pick that found nothing.
type pick struct {
	tenant string
	ready  []string
	total  int64
}

// NewFairScheduler builds a FairScheduler: weights gives some tenants
// their weight, every other tenant has defaultWeight. It refuses a weight
// or default below 1 or above MaxTenantWeight with a *SchedulerError.
func NewFairScheduler(weights map[string]int, defaultWeight int) (*FairScheduler, error) {
	if err := checkWeight("", defaultWeight); err != nil {
		return nil, err
	}
	tenants := make([]string, 0, len(weights))
	for t := range weights { //loom:sorted keys are sorted before use
		tenants = append(tenants, t)
	}
	slices.Sort(tenants) // the first bad weight named is always the same one
	own := make(map[string]int, len(weights))
	for _, t := range tenants {
		if t == "" {
			return nil, &SchedulerError{Weight: weights[t], Reason: `the tenant "" takes the default weight; set defaultWeight instead`}
		}
		if err := checkWeight(t, weights[t]); err != nil {
			return nil, err
		}
		own[t] = weights[t]
	}
	return &FairScheduler{weights: own, defaultWeight: defaultWeight, current: map[string]int64{}}, nil
}

func checkWeight(tenant string, w int) error {
	switch {
	case w < 1:
		return &SchedulerError{Tenant: tenant, Weight: w, Reason: "must be at least 1 (a tenant with no weight would never be picked)"}
	case w > MaxTenantWeight:
		return &SchedulerError{Tenant: tenant, Weight: w, Reason: "must be at most " + strconv.Itoa(MaxTenantWeight)}
	}
	return nil
}

// Weight is tenant's weight.
func (s *FairScheduler) Weight(tenant string) int {
	if w, ok := s.weights[tenant]; ok {
		return w
	}
	return s.defaultWeight
}

// Pick gives every ready tenant its weight in credit and picks the one with
// the most (the first in sorted order on a tie), which then pays the total
// of the weights: smooth weighted round-robin.
func (s *FairScheduler) Pick(ready []string) (string, bool) {
	if len(ready) == 0 {
		return "", false
	}
	tenants := slices.DeleteFunc(slices.Clone(ready), func(t string) bool { return t == "" })
	if len(tenants) == 0 {
		return "", true // only items without a tenant are ready: claim them
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]int64, len(tenants))
	var total int64
	best := tenants[0]
	for _, t := range tenants {
		w := int64(s.Weight(t))
		c := s.current[t] + w
		next[t] = c
		total += w
		if c > next[best] {
			best = t
		}
	}
	next[best] -= total
	s.current = next
	s.last = pick{tenant: best, ready: tenants, total: total}
	return best, true
}

// Claimed undoes the last pick when its claim found nothing, so a tenant
// whose items are held back does not lose its turn, and the others do not
// gain credit from a pick that claimed nothing.
func (s *FairScheduler) Claimed(tenant string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 || s.last.tenant != tenant || s.last.ready == nil {
		s.last = pick{}
		return
	}
	for _, t := range s.last.ready {
		s.current[t] -= int64(s.Weight(t))
	}
	s.current[tenant] += s.last.total
	s.last = pick{}
}
