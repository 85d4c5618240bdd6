package dst

import (
	"context"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/store"
)

// snapshotView is one process's view of the snapshot store: it fails
// saves (FaultSnapshot) and, once the process is dead, everything.
type snapshotView struct {
	r     *run
	p     *process
	inner store.SnapshotStore
}

var _ store.SnapshotStore = (*snapshotView)(nil)

// Save implements store.SnapshotStore; a FaultSnapshot refuses it, storing
// nothing.
func (v *snapshotView) Save(ctx context.Context, s store.Snapshot) error {
	if err := v.p.check(s.ExecutionID); err != nil {
		return err
	}
	if v.r.plan.fire(FaultSnapshot, s.ExecutionID, s.Sequence) {
		return ErrSnapshotFault
	}
	return v.inner.Save(ctx, s)
}

// LoadLatest implements store.SnapshotStore.
func (v *snapshotView) LoadLatest(ctx context.Context, executionID string) (store.Snapshot, bool, error) {
	if err := v.p.check(executionID); err != nil {
		return store.Snapshot{}, false, err
	}
	return v.inner.LoadLatest(ctx, executionID)
}

// LoadAt implements store.SnapshotStore.
func (v *snapshotView) LoadAt(ctx context.Context, executionID string, atMost int64) (store.Snapshot, bool, error) {
	if err := v.p.check(executionID); err != nil {
		return store.Snapshot{}, false, err
	}
	return v.inner.LoadAt(ctx, executionID, atMost)
}

// Close does not close the durable store.
func (v *snapshotView) Close() error { return nil }

// timerView is one process's view of the timer store. Its Due hands out
// at most the process's budget of timers, so the simulator fires them one
// at a time, each with every execution at rest before the next.
type timerView struct {
	p     *process
	inner store.TimerStore
}

var _ store.TimerStore = (*timerView)(nil)

// Put implements store.TimerStore.
func (v *timerView) Put(ctx context.Context, t store.Timer) error {
	if err := v.p.check(t.ExecutionID); err != nil {
		return err
	}
	return v.inner.Put(ctx, t)
}

// Get implements store.TimerStore.
func (v *timerView) Get(ctx context.Context, key string) (store.Timer, bool, error) {
	if err := v.p.checkAll(); err != nil {
		return store.Timer{}, false, err
	}
	return v.inner.Get(ctx, key)
}

// Due implements store.TimerStore, within the process's timer budget.
func (v *timerView) Due(ctx context.Context, now int64, limit int) ([]store.Timer, error) {
	if err := v.p.checkAll(); err != nil {
		return nil, err
	}
	n := v.p.takeBudget(limit)
	if n <= 0 {
		return nil, nil
	}
	ts, err := v.inner.Due(ctx, now, n)
	v.p.spendBudget(len(ts))
	return ts, err
}

// Delete implements store.TimerStore.
func (v *timerView) Delete(ctx context.Context, key string, wakeAt int64) (bool, error) {
	if err := v.p.checkAll(); err != nil {
		return false, err
	}
	return v.inner.Delete(ctx, key, wakeAt)
}

// Close does not close the durable store.
func (v *timerView) Close() error { return nil }

// leaseView is one process's view of the lease store. A FaultLeaseExpiry
// shows another (dead) process's live lease as expired: Get reports it
// expiring now, and Acquire takes it over as if its time were up.
type leaseView struct {
	r     *run
	p     *process
	inner store.LeaseStore
}

var _ store.LeaseStore = (*leaseView)(nil)

// Acquire implements store.LeaseStore.
func (v *leaseView) Acquire(ctx context.Context, executionID, owner string, now, ttlMs int64) (store.Lease, error) {
	if err := v.p.check(executionID); err != nil {
		return store.Lease{}, err
	}
	cur, ok, err := v.inner.Get(ctx, executionID)
	if err != nil {
		return store.Lease{}, err
	}
	if ok && v.expiredEarly(cur, now) {
		now = cur.ExpiresAt // its time is up, as far as this process can tell
	}
	return v.inner.Acquire(ctx, executionID, owner, now, ttlMs)
}

// Get implements store.LeaseStore.
func (v *leaseView) Get(ctx context.Context, executionID string) (store.Lease, bool, error) {
	if err := v.p.check(executionID); err != nil {
		return store.Lease{}, false, err
	}
	l, ok, err := v.inner.Get(ctx, executionID)
	now := v.r.clock.Now().UnixMilli()
	if err == nil && ok && v.expiredEarly(l, now) {
		l.ExpiresAt = now
	}
	return l, ok, err
}

// expiredEarly decides whether l, another process's live lease, reads as
// expired: once decided for its token, it stays so.
func (v *leaseView) expiredEarly(l store.Lease, now int64) bool {
	if l.Owner == "" || l.Owner == v.p.node || l.ExpiresAt <= now {
		return false
	}
	// Keyed by the owner, not the token: how many times a lease was taken
	// depends on follow-ups of a drive that race the next operation.
	owner, ok := strings.CutPrefix(l.Owner, "dst-node-")
	n, err := strconv.ParseInt(owner, 10, 64)
	if !ok || err != nil {
		return false
	}
	k := faultKey{kind: FaultLeaseExpiry, exec: l.ExecutionID, at: n}
	v.p.mu.Lock()
	off := v.p.leaseOff[k]
	v.p.mu.Unlock()
	if off {
		return true
	}
	if !v.r.plan.fire(FaultLeaseExpiry, l.ExecutionID, n) {
		return false
	}
	v.p.mu.Lock()
	v.p.leaseOff[k] = true
	v.p.mu.Unlock()
	return true
}

// Renew implements store.LeaseStore.
func (v *leaseView) Renew(ctx context.Context, l store.Lease, now, ttlMs int64) (store.Lease, error) {
	if err := v.p.check(l.ExecutionID); err != nil {
		return store.Lease{}, err
	}
	return v.inner.Renew(ctx, l, now, ttlMs)
}

// Release implements store.LeaseStore.
func (v *leaseView) Release(ctx context.Context, l store.Lease) error {
	if err := v.p.check(l.ExecutionID); err != nil {
		return err
	}
	return v.inner.Release(ctx, l)
}

// Close does not close the durable store.
func (v *leaseView) Close() error { return nil }
