package store

import (
	"context"
	"encoding/json"
)

// TimerStoreSPIVersion versions the TimerStore SPI (pinned with its method
// set by TestSPIVersionsPinMethodSets).
const TimerStoreSPIVersion = "1.1.0"

// Timer is a durable wake-up: at WakeAt (epoch ms, on the runtime's clock)
// the poller fires it. Key identifies it: storing a timer under a key
// replaces the previous one, so a timer is also a cursor (a schedule's next
// tick). The log stays authoritative: a timer only prompts a resume or a
// start, which the kernel checks against the log, so firing a stale or
// duplicate timer is harmless.
type Timer struct {
	Key         string          `json:"key"`
	ExecutionID string          `json:"executionId,omitempty"`
	WakeAt      int64           `json:"wakeAt"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// TimerStore keeps durable timers (T1).
type TimerStore interface {
	// Put stores t under t.Key, replacing any timer with that key. It
	// returns once t is durable.
	Put(ctx context.Context, t Timer) error
	// Get returns the timer under key.
	Get(ctx context.Context, key string) (Timer, bool, error)
	// Due returns up to limit timers with WakeAt <= now, ordered by WakeAt
	// then Key.
	Due(ctx context.Context, now int64, limit int) ([]Timer, error)
	// Delete removes the timer under key iff its WakeAt is wakeAt (a newer
	// timer stored under the same key survives) and reports whether it did.
	Delete(ctx context.Context, key string, wakeAt int64) (bool, error)
	// Close releases the store.
	Close() error
}
