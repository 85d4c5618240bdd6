package crashtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ErrKilled is what every write through a killed FaultStore returns: the
// process it stands for is dead.
var ErrKilled = errors.New("crashtest: process killed")

// errNoCapability refuses an optional capability the inner store lacks.
var errNoCapability = errors.New("crashtest: the inner event store lacks this capability")

// Interface checks: the wrapper offers exactly the optional capabilities
// the runtime looks for. It deliberately omits store.Fencer and
// store.ExecutionDeleter: forwarding AppendFenced would open a second,
// uncounted write path.
var (
	_ store.EventStore   = (*FaultStore)(nil)
	_ store.Subscriber   = (*FaultStore)(nil)
	_ store.RangeReader  = (*FaultStore)(nil)
	_ store.PrefixCopier = (*FaultStore)(nil)
)

// FaultStore wraps a store.EventStore and "kills the process" after a
// chosen number of durable events. Until KillAfter is called it forwards
// everything. After KillAfter(n), once n events in total have been
// appended through it, it writes nothing more: the Append whose batch
// crosses the limit writes only the events up to the limit (one Append of
// that prefix to the inner store, as a crash in the middle of a batch
// leaves a durable prefix) and returns ErrKilled; every later write fails
// with ErrKilled. Reads and subscriptions keep working, since the log
// outlives the process. Only events the inner store acknowledged count.
//
// Appends are serialised under one lock, so the count is exact even when
// a journal and a gate transaction write concurrently.
type FaultStore struct {
	inner store.EventStore

	mu       sync.Mutex
	limit    int // -1: never kill
	appended int // events the inner store acknowledged through this wrapper
	dead     bool
	killed   chan struct{} // closed when the wrapper dies
}

// NewFaultStore wraps inner; it kills nothing until KillAfter.
func NewFaultStore(inner store.EventStore) *FaultStore {
	return &FaultStore{inner: inner, limit: -1, killed: make(chan struct{})}
}

// KillAfter arms the fault: the process dies once n events in total have
// been durably appended through f (counting those appended before the
// call). A negative n disarms it; a store already dead stays dead.
func (f *FaultStore) KillAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 {
		n = -1
	}
	f.limit = n
}

// Appended returns how many events have been durably appended through f.
func (f *FaultStore) Appended() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.appended
}

// Killed returns a channel closed when f dies, after the write that killed
// it has reached the inner store.
func (f *FaultStore) Killed() <-chan struct{} { return f.killed }

// Dead reports whether f has died.
func (f *FaultStore) Dead() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dead
}

// Kill kills f now, as a process dying outside any write (inside an
// effect, say): every later write fails with ErrKilled and Killed is
// closed. Killing a dead store does nothing.
func (f *FaultStore) Kill() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.die()
}

// die marks f dead; f.mu is held.
func (f *FaultStore) die() {
	if !f.dead {
		f.dead = true
		close(f.killed)
	}
}

// room returns how many more events may be written before the kill, or -1
// for no limit; f.mu is held.
func (f *FaultStore) room() int {
	if f.limit < 0 {
		return -1
	}
	return max(f.limit-f.appended, 0)
}

// Append forwards events while the limit allows; the batch that crosses it
// is cut to the allowed prefix, after which f is dead.
func (f *FaultStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return ErrKilled
	}
	room := f.room()
	if room < 0 || len(events) <= room {
		err := f.inner.Append(ctx, executionID, expected, events)
		if err == nil {
			f.appended += len(events)
		}
		return err
	}
	defer f.die()
	if room == 0 {
		return ErrKilled
	}
	if err := f.inner.Append(ctx, executionID, expected, events[:room]); err != nil {
		return fmt.Errorf("%w (the durable prefix failed too: %w)", ErrKilled, err)
	}
	f.appended += room
	return fmt.Errorf("%w after %d of %d events of a batch", ErrKilled, room, len(events))
}

// ReadFrom forwards to the inner store.
func (f *FaultStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	return f.inner.ReadFrom(ctx, executionID, from)
}

// ListExecutions forwards to the inner store.
func (f *FaultStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	return f.inner.ListExecutions(ctx, after, limit)
}

// Close forwards to the inner store.
func (f *FaultStore) Close() error { return f.inner.Close() }

// Subscribe forwards to the inner store's store.Subscriber, or refuses
// when the inner store has none.
func (f *FaultStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	s, ok := f.inner.(store.Subscriber)
	if !ok {
		return nil, fmt.Errorf("subscribe: %w", errNoCapability)
	}
	return s.Subscribe(ctx, executionID, from)
}

// ReadRange forwards to the inner store's store.RangeReader, or refuses
// when the inner store has none.
func (f *FaultStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	r, ok := f.inner.(store.RangeReader)
	if !ok {
		return nil, fmt.Errorf("read range: %w", errNoCapability)
	}
	return r.ReadRange(ctx, executionID, from, to)
}

// CopyPrefix forwards to the inner store's store.PrefixCopier. A copy is
// all or nothing, so one that would cross the limit kills f before it is
// written; one that fits counts its through+1 events.
func (f *FaultStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	pc, ok := f.inner.(store.PrefixCopier)
	if !ok {
		return fmt.Errorf("copy prefix: %w", errNoCapability)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return ErrKilled
	}
	n := int(through + 1)
	if room := f.room(); room >= 0 && n > room {
		f.die()
		return ErrKilled
	}
	if err := pc.CopyPrefix(ctx, from, to, through); err != nil {
		return err
	}
	f.appended += n
	return nil
}
