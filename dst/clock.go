package dst

import (
	"sync"
	"time"
)

// Epoch is where a run's virtual clock starts: 2026-01-01T00:00:00Z, as
// loomtest's, so every timestamp of a run is a function of its schedule.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// clock is a run's virtual clock, a loom.Clock that moves only when the
// simulator moves it (an OpAdvance, a lease wait) and never back. It is
// safe for concurrent use: drives read it while the simulator waits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: Epoch} }

// Now returns the clock's instant.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advanceTo moves the clock to t unless it already stands at or after t.
func (c *clock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
