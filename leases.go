package loom

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Heartbeat leases (architecture §5.5; ADR 0130 D11): with Config.Leases,
// a node holds an execution's lease while it drives it and renews it every
// Config.Heartbeat (default LeaseTTL/3). A live lease vetoes another node's re-drive; an expired one is
// evidence the driver is gone, and Recover on any node takes the execution
// over (EXECUTION_RECOVERED), its fence refusing the old driver's writes. A
// parked execution holds no lease: any node may resume it. A fresh start
// acquires its lease lazily, at the first heartbeat, so starting costs no
// extra write; until then its recent activity vetoes a re-drive.

func (rt *Runtime) leaseTTL() int64 { return rt.cfg.LeaseTTL.Milliseconds() }

// leaseLocks serialize, per execution, this node's lease writes: a
// heartbeat's lazy acquisition, a park's release and a resume's
// acquisition of one execution never interleave, so none of them gives up
// or overwrites a lease another of them just took. Writes on different
// executions never wait for each other (a heartbeat renews side by side).
type leaseLocks struct {
	mu    sync.Mutex
	locks map[string]*leaseLock
}

type leaseLock struct {
	sync.Mutex
	refs int
}

// lock locks id's lease writes and returns the unlock.
func (ls *leaseLocks) lock(id string) (unlock func()) {
	ls.mu.Lock()
	if ls.locks == nil {
		ls.locks = map[string]*leaseLock{}
	}
	l := ls.locks[id]
	if l == nil {
		l = &leaseLock{}
		ls.locks[id] = l
	}
	l.refs++
	ls.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		ls.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(ls.locks, id)
		}
		ls.mu.Unlock()
	}
}

// acquireLease takes the execution's lease for this node before a gate
// transaction or a re-drive; another node's live lease refuses it.
func (rt *Runtime) acquireLease(ctx context.Context, id string) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	defer rt.leaseLocks.lock(id)()
	from := rt.lapsedOwner(ctx, id)
	l, err := rt.cfg.Leases.Acquire(ctx, id, rt.cfg.NodeID, rt.cfg.Clock.Now().UnixMilli(), rt.leaseTTL())
	var held *store.LeaseHeldError
	if errors.As(err, &held) {
		return &ExecutionBusyError{ExecutionID: id, Owner: held.Owner, ExpiresAt: time.UnixMilli(held.ExpiresAt)}
	}
	if err != nil {
		return err
	}
	rt.holdLease(id, l)
	if from != "" {
		rt.cfg.Observer.LeaseTakenOver(ctx, id, from)
	}
	return nil
}

// lapsedOwner names the other node whose lapsed lease an acquire would
// take over, for an Observer; without one it reads nothing.
func (rt *Runtime) lapsedOwner(ctx context.Context, id string) string {
	if rt.cfg.Observer == nil {
		return ""
	}
	l, ok, err := rt.cfg.Leases.Get(ctx, id)
	if err != nil || !ok || l.Owner == "" || l.Owner == rt.cfg.NodeID {
		return ""
	}
	return l.Owner
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

// releaseLease gives the lease up when the drive ends.
func (rt *Runtime) releaseLease(id string) {
	rt.releaseLeaseIf(id, func() bool { return true })
}

// releaseParkedLease gives the lease up for a park that no resume has
// taken yet: once a resume took the park, the lease is the resume's.
func (rt *Runtime) releaseParkedLease(sp *stickyPark) {
	rt.releaseLeaseIf(sp.r.x.id, func() bool { return rt.sticky[sp.r.x.id] == sp })
}

// releaseLeaseIf releases the lease held for id when mine (called under
// rt.mu) says it is still this caller's to release.
func (rt *Runtime) releaseLeaseIf(id string, mine func() bool) {
	if rt.cfg.Leases == nil {
		return
	}
	defer rt.leaseLocks.lock(id)()
	rt.mu.Lock()
	l, ok := rt.leases[id]
	ok = ok && mine()
	if ok {
		delete(rt.leases, id)
	}
	rt.mu.Unlock()
	if ok {
		if err := rt.cfg.Leases.Release(context.Background(), l); err != nil {
			rt.cfg.Logger.Warn("loom: lease not released; it expires", "execution", id, "error", err)
		}
	}
}

// RenewLeases is one heartbeat: it renews the lease of every execution this
// node is running, acquiring it for fresh starts, and stops a drive whose
// lease was taken. The background heartbeat calls it every
// Config.Heartbeat; tests with a fake clock call it directly.
func (rt *Runtime) RenewLeases(ctx context.Context) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	rt.mu.Lock()
	type driving struct {
		id string
		r  *drive
	}
	var all []driving
	for id, x := range rt.live { //loom:order-independent each lease renewed on its own
		if x.drive == nil {
			continue
		}
		// A parking run keeps its lease renewed until the park is durable
		// and releases it; a parked one holds none.
		if _, held := rt.leases[id]; held || !x.drive.isParked() {
			all = append(all, driving{id, x.drive})
		}
	}
	rt.mu.Unlock()
	now, ttl := rt.cfg.Clock.Now().UnixMilli(), rt.leaseTTL()
	// Renewals go out side by side: one after another, a busy node's
	// heartbeat would take longer than a TTL and its live leases expire.
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, maxConcurrentRenewals)
	)
	for _, d := range all {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := rt.renewLease(ctx, d.id, d.r, now, ttl); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// renewLease renews (or, for a fresh start, acquires) the lease of id for
// its drive r, if r still drives id (unparked, or parking with its lease
// not yet released), and stops r if the lease is another node's.
func (rt *Runtime) renewLease(ctx context.Context, id string, r *drive, now, ttl int64) error {
	defer rt.leaseLocks.lock(id)()
	rt.mu.Lock()
	x := rt.live[id]
	l, has := rt.leases[id]
	current := x != nil && x.drive == r && (has || !r.isParked())
	rt.mu.Unlock()
	if !current {
		return nil // parked or ended since the listing: its lease is not the heartbeat's
	}
	var err error
	if has {
		l, err = rt.cfg.Leases.Renew(ctx, l, now, ttl)
	} else {
		l, err = rt.cfg.Leases.Acquire(ctx, id, rt.cfg.NodeID, now, ttl)
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrLeaseHeld):
		r.j.Halt(ErrLeaseLost)
		r.root.stop.Store(true)
		r.cancel()
		return nil
	case err != nil:
		return err
	}
	rt.holdLease(id, l)
	return nil
}

// maxConcurrentRenewals bounds the lease writes one heartbeat has in flight.
const maxConcurrentRenewals = 16

// heartbeat renews leases every Config.Heartbeat until the runtime closes.
func (rt *Runtime) heartbeat() {
	defer rt.wg.Done()
	tick := time.NewTicker(rt.cfg.Heartbeat)
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

// vetoRedrive refuses a re-drive of a running execution that another node
// drives: its lease is live, or no lease was ever taken and the execution
// shows activity younger than a TTL (a fresh start takes its lease at its
// first heartbeat). Without Config.Leases nothing vetoes: one node is
// assumed. It writes nothing.
func (rt *Runtime) vetoRedrive(ctx context.Context, id string, st fold.State) error {
	if rt.cfg.Leases == nil {
		return nil
	}
	now := rt.cfg.Clock.Now().UnixMilli()
	l, ok, err := rt.cfg.Leases.Get(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case ok && l.Owner != "":
		if l.ExpiresAt > now && l.Owner != rt.cfg.NodeID {
			return &ExecutionBusyError{ExecutionID: id, Owner: l.Owner, ExpiresAt: time.UnixMilli(l.ExpiresAt)}
		}
		return nil
	case now-st.UpdatedAt < rt.leaseTTL():
		return &ExecutionBusyError{ExecutionID: id, ExpiresAt: time.UnixMilli(st.UpdatedAt + rt.leaseTTL())}
	}
	return nil
}
