package loomtest

import (
	"sync"
	"time"
)

// Epoch is where a new Clock stands: 2026-01-01T00:00:00Z. A fixed start
// makes every timestamp, recorded Now and timer wakeAt of a test the same
// on every run.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake loom.Clock that moves only when the test moves it. It is
// safe for concurrent use: flows, effects and the test read it at once.
// Its zero value stands at Epoch.
type Clock struct {
	mu  sync.Mutex
	now time.Time
	set bool
}

// NewClock returns a Clock standing at start (at Epoch for the zero time).
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	if !start.IsZero() {
		c.Set(start)
	}
	return c
}

// Now returns the clock's instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		return Epoch
	}
	return c.now
}

// Advance moves the clock forward by d and returns the new instant. A
// negative d moves it back, which the kernel then sees as time running
// backwards: only do it on purpose.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = Epoch, true
	}
	c.now = c.now.Add(d)
	return c.now
}

// Set moves the clock to t, forward or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.set = t, true
}

// advanceTo moves the clock to t unless it already stands at or after t:
// time skipping never moves the clock back.
func (c *Clock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		c.now, c.set = Epoch, true
	}
	if t.After(c.now) {
		c.now = t
	}
}
