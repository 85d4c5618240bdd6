package loom

import (
	"context"
	"errors"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Heartbeat leases (architecture §5.5; ADR 0130 D11): with Config.Leases,
// a node holds an execution's lease while it drives it and renews it every
// LeaseTTL/3. A live lease vetoes another node's re-drive; an expired one is
// evidence the driver is gone, and Recover on any node takes the execution
// over (EXECUTION_RECOVERED), its fence refusing the old driver's writes. A
// parked execution holds no lease: any node may resume it. A fresh start
// acquires its lease lazily, at the first heartbeat, so starting costs no
// extra write; until then its recent activity vetoes a re-drive.

// ErrLeaseLost is the journal failure of a drive whose lease another node
// took: the drive stops, and its writes are refused by the fence anyway.
var ErrLeaseLost = errors.New("loom: lease lost to another node")

func (rt *Runtime) leaseTTL() int64 { return rt.cfg.LeaseTTL.Milliseconds() }

// acquireLease takes the execution's lease for this node before a gate
// transaction or a re-drive; another node's live lease refuses it.
func (rt *Runtime) acquireLease(ctx context.Context, id string) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	l, err := rt.cfg.Leases.Acquire(ctx, id, rt.cfg.NodeID, rt.cfg.Clock.Now().UnixMilli(), rt.leaseTTL())
	var held *store.LeaseHeldError
	if errors.As(err, &held) {
		return &ResumeRefusedError{ExecutionID: id, Reason: RefusedBusy, Detail: "another node drives it: " + held.Owner}
	}
	if err != nil {
		return err
	}
	rt.holdLease(id, l)
	return nil
}

// holdLease remembers a lease this node holds for a claimed execution.
func (rt *Runtime) holdLease(id string, l store.Lease) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, claimed := rt.live[id]; !claimed {
		return
	}
	if rt.leases == nil {
		rt.leases = map[string]store.Lease{}
	}
	rt.leases[id] = l
}

// releaseLease gives the lease up when the drive parks or ends.
func (rt *Runtime) releaseLease(id string) {
	if rt.cfg.Leases == nil {
		return
	}
	rt.mu.Lock()
	l, ok := rt.leases[id]
	delete(rt.leases, id)
	rt.mu.Unlock()
	if ok {
		if err := rt.cfg.Leases.Release(context.Background(), l); err != nil {
			rt.cfg.Logger.Warn("loom: lease not released; it expires", "execution", id, "error", err)
		}
	}
}

// RenewLeases is one heartbeat: it renews the lease of every execution this
// node is running, acquiring it for fresh starts, and stops a drive whose
// lease was taken. The background heartbeat calls it every LeaseTTL/3;
// tests with a fake clock call it directly.
func (rt *Runtime) RenewLeases(ctx context.Context) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	rt.mu.Lock()
	type held struct {
		id    string
		r     *run
		lease store.Lease
		has   bool
	}
	var all []held
	for id, x := range rt.live { //loom:order-independent each lease renewed on its own
		if x.run == nil || x.run.isParked() {
			continue
		}
		l, ok := rt.leases[id]
		all = append(all, held{id: id, r: x.run, lease: l, has: ok})
	}
	rt.mu.Unlock()
	now, ttl := rt.cfg.Clock.Now().UnixMilli(), rt.leaseTTL()
	var first error
	for _, h := range all {
		var l store.Lease
		var err error
		if h.has {
			l, err = rt.cfg.Leases.Renew(ctx, h.lease, now, ttl)
		} else {
			l, err = rt.cfg.Leases.Acquire(ctx, h.id, rt.cfg.NodeID, now, ttl)
		}
		switch {
		case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrLeaseHeld):
			h.r.j.halt(ErrLeaseLost)
			h.r.root.stop.Store(true)
			h.r.cancel()
		case err != nil:
			if first == nil {
				first = err
			}
		default:
			rt.holdLease(h.id, l)
		}
	}
	return first
}

// heartbeat renews leases every LeaseTTL/3 until the runtime closes.
func (rt *Runtime) heartbeat() {
	defer rt.wg.Done()
	tick := time.NewTicker(rt.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
			if err := rt.RenewLeases(rt.ctx); err != nil && rt.ctx.Err() == nil {
				rt.cfg.Logger.Warn("loom: heartbeat failed", "error", err)
			}
		}
	}
}

// abandoned says whether a running execution no process here drives looks
// abandoned: no live lease, and (for a lease never taken) no activity for a
// whole TTL.
func (rt *Runtime) abandoned(ctx context.Context, id string, st fold.State) (bool, error) {
	if rt.cfg.Leases == nil {
		return true, nil
	}
	now := rt.cfg.Clock.Now().UnixMilli()
	l, ok, err := rt.cfg.Leases.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if ok && l.Owner != "" {
		return l.ExpiresAt <= now, nil
	}
	return now-st.UpdatedAt >= rt.leaseTTL(), nil
}
