package dst

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/journal"
	"github.com/loom-kernel/loom/store"
)

// DurableEvents is what a run needs of its durable event log: the log and
// the capabilities the runtime uses in production (fencing, ranges, the
// status index). memstore.EventStore and the SQLite and PostgreSQL stores
// have them all. Subscriptions are the fault layer's own.
type DurableEvents interface {
	store.EventStore
	store.Fencer
	store.StatusIndex
	store.RangeReader
}

// Interface checks: the view offers what the runtime looks for.
var (
	_ store.EventStore  = (*eventView)(nil)
	_ store.Fencer      = (*eventView)(nil)
	_ store.StatusIndex = (*eventView)(nil)
	_ store.RangeReader = (*eventView)(nil)
	_ store.Subscriber  = (*eventView)(nil)
)

// redeliverAfter is how late a withheld wake-up (FaultNotifyDrop) reaches
// its followers: the re-read a store does after a reconnect. It costs a
// waiter latency only, never an outcome.
const redeliverAfter = 2 * time.Millisecond

// eventView is one process's view of the durable event log: it injects
// the append faults, records what the store acknowledged, wakes its
// subscriptions (withholding or doubling a wake-up) and fails like a
// killed process once the process dies.
//
// It stamps every event's id as "<execution>:<sequence>" on its way into
// the log, as the journal does by default: the kernel mints event ids from
// one counter that concurrent drives share, so without the stamp two runs
// of one seed would differ in ids alone. Nothing in the kernel reads an
// event id back but an inbox message's, which it reads from the store.
type eventView struct {
	r     *run
	p     *process
	inner DurableEvents
	// mu serialises writes, so "the append a fault hits" is exact when a
	// journal and a gate transaction write at once.
	mu sync.Mutex
}

// stamp copies evs with their positional ids.
func stamp(evs []event.Envelope) []event.Envelope {
	out := make([]event.Envelope, len(evs))
	for i, e := range evs {
		e.ID = e.ExecutionID + ":" + strconv.FormatInt(e.Sequence, 10)
		out[i] = e
	}
	return out
}

// write appends evs of exec through put, injecting the append faults.
func (v *eventView) write(ctx context.Context, exec string, evs []event.Envelope, put func([]event.Envelope) error) error {
	op := v.r.plan.current()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.p.check(exec); err != nil {
		return err
	}
	batch := stamp(evs)
	cut, hit := len(batch), FaultKind("")
	for i, e := range batch {
		if v.r.plan.fireIn(op, faultKey{kind: FaultCrash, exec: exec, at: e.Sequence}) {
			cut, hit = i, FaultCrash
			break
		}
		if v.r.plan.fireIn(op, faultKey{kind: FaultReject, exec: exec, at: e.Sequence}) {
			cut, hit = i, FaultReject
			break
		}
	}
	// A fault at an event writes the events before it, as if the journal
	// had batched them apart, so what a fault leaves does not depend on
	// batching; but never part of a unit the journal commits whole (an
	// answer and its resume), which no batching splits.
	for cut > 0 && cut < len(batch) && journal.Joins(ctx, cut) {
		cut--
	}
	var err error
	if cut > 0 {
		err = put(batch[:cut])
		if err == nil {
			if hit == "" {
				v.r.acked.add(batch)
			}
			v.notify(op, exec, batch[:cut])
		}
	}
	switch hit {
	case FaultCrash:
		v.p.stop(exec)
		return fmt.Errorf("%w at %s sequence %d", ErrCrashed, exec, batch[cut].Sequence)
	case FaultReject:
		return fmt.Errorf("%w at %s sequence %d", ErrRejected, exec, batch[cut].Sequence)
	}
	return err
}

// notify wakes exec's followers after an append of evs. Each event is
// an opportunity for a withheld or a doubled wake-up, whatever batch the
// journal put it in, so the faults that fire do not depend on batching.
func (v *eventView) notify(op int, exec string, evs []event.Envelope) {
	drop, dup := false, false
	for _, e := range evs {
		drop = v.r.plan.fireIn(op, faultKey{kind: FaultNotifyDrop, exec: exec, at: e.Sequence}) || drop
		dup = v.r.plan.fireIn(op, faultKey{kind: FaultNotifyDup, exec: exec, at: e.Sequence}) || dup
	}
	switch {
	case drop:
		time.AfterFunc(redeliverAfter, func() { v.p.wake.Notify(exec) })
	case dup:
		v.p.wake.Notify(exec)
		time.AfterFunc(redeliverAfter, func() { v.p.wake.Notify(exec) })
	default:
		v.p.wake.Notify(exec)
	}
}

// Append implements store.EventStore with the append faults.
func (v *eventView) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return v.write(ctx, executionID, events, func(b []event.Envelope) error {
		return v.inner.Append(ctx, executionID, expected, b)
	})
}

// AppendFenced implements store.Fencer with the append faults.
func (v *eventView) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	return v.write(ctx, executionID, events, func(b []event.Envelope) error {
		return v.inner.AppendFenced(ctx, executionID, token, expected, b)
	})
}

// AcquireFence implements store.Fencer.
func (v *eventView) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	if err := v.p.check(executionID); err != nil {
		return 0, err
	}
	return v.inner.AcquireFence(ctx, executionID)
}

// ReadFrom implements store.EventStore.
func (v *eventView) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	if err := v.p.check(executionID); err != nil {
		return nil, err
	}
	return v.inner.ReadFrom(ctx, executionID, from)
}

// ReadRange implements store.RangeReader.
func (v *eventView) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	if err := v.p.check(executionID); err != nil {
		return nil, err
	}
	return v.inner.ReadRange(ctx, executionID, from, to)
}

// ListExecutions implements store.EventStore.
func (v *eventView) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	if err := v.p.checkAll(); err != nil {
		return store.ExecutionPage{}, err
	}
	return v.inner.ListExecutions(ctx, after, limit)
}

// ListUnfinished implements store.StatusIndex.
func (v *eventView) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	if err := v.p.checkAll(); err != nil {
		return store.UnfinishedPage{}, err
	}
	return v.inner.ListUnfinished(ctx, after, limit)
}

// Subscribe implements store.Subscriber over the process's own wake-ups:
// catch-up, then a re-read per wake-up, through store.Follow. Once the
// execution's part of the process is dead, the re-read fails and the
// subscription ends with ErrCrashed.
func (v *eventView) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	if err := v.p.check(executionID); err != nil {
		return nil, err
	}
	read := func(ctx context.Context, from int64) ([]event.Envelope, error) {
		return v.ReadFrom(ctx, executionID, max(from, 0))
	}
	wait := func() <-chan struct{} { return v.p.wake.Wait(executionID) }
	return store.Follow(ctx, read, wait, max(from, 0)), nil
}

// Close does not close the durable log: the next process opens on it.
func (v *eventView) Close() error { return nil }

// ackLedger is every event the durable log acknowledged in a run, by
// execution and sequence, as canonical bytes: the final log must hold each.
type ackLedger struct {
	mu sync.Mutex
	by map[string]map[int64][]byte
}

func (l *ackLedger) add(evs []event.Envelope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]map[int64][]byte{}
	}
	for _, e := range evs {
		m := l.by[e.ExecutionID]
		if m == nil {
			m = map[int64][]byte{}
			l.by[e.ExecutionID] = m
		}
		m[e.Sequence] = event.EncodeValid(e)
	}
}
