package auditchain

import "sync"

// headCache remembers the last link written through the wrapper per
// execution, keyed by its sequence, so an append need not read the log. It
// is bounded (an arbitrary entry is evicted when full) and never wrong: an
// entry is only the link of a durable append, a failed write drops it, and
// a put from an append that overlapped any drop is ignored (the epoch), so
// a late put never restores a head a delete or a refusal removed.
type headCache struct {
	mu      sync.Mutex
	max     int // <= 0: disabled
	entries map[string]headEntry
	drops   uint64 // the epoch: how many drops so far
}

type headEntry struct {
	seq  int64
	link link
}

func newHeadCache(max int) *headCache {
	return &headCache{max: max, entries: make(map[string]headEntry)}
}

// epoch returns the drop count, to hand back to put.
func (c *headCache) epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drops
}

// get returns the link of executionID's event seq, if cached.
func (c *headCache) get(executionID string, seq int64) (link, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[executionID]
	if !ok || e.seq != seq {
		return link{}, false
	}
	return e.link, true
}

// put caches l as the link of executionID's event seq, unless a drop
// happened since epoch was read.
func (c *headCache) put(executionID string, seq int64, l link, epoch uint64) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drops != epoch {
		return
	}
	if _, ok := c.entries[executionID]; !ok && len(c.entries) >= c.max {
		for k := range c.entries { // any entry: the cache only saves a read
			delete(c.entries, k)
			break
		}
	}
	c.entries[executionID] = headEntry{seq: seq, link: l}
}

// drop forgets executionID's head and starts a new epoch.
func (c *headCache) drop(executionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, executionID)
	c.drops++
}
