package dst

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/loom-kernel/loom"
)

// startProcess starts the next process on the durable stores.
func (r *run) startProcess() {
	r.procs++
	p := newProcess(r.procs)
	// Runs on parallel workers build runtimes at once from the same
	// *loom.Flow values: the kernel writes nothing into a Flow.
	flows := make([]*loom.Flow, 0, len(r.sim.Flows))
	for _, f := range r.sim.Flows {
		flows = append(flows, f.Flow)
	}
	cfg := loom.Config{
		Events:       &eventView{r: r, p: p, inner: r.events},
		Snapshots:    &snapshotView{r: r, p: p, inner: r.snapshots},
		Timers:       &timerView{p: p, inner: r.timers},
		TimerPoll:    -1,
		TimerWorkers: 1,
		Features:     loom.Features{Inbox: true, ContinueAsNew: true, Scopes: true, Children: true},
		Middleware:   append(slices.Clone(r.sim.Middleware), r.ledger.middleware(p)),
		Recovery:     loom.Recovery{Disabled: true},
		Flows:        flows,
		Durability:   r.cfg.Durability,
		NodeID:       p.node,
		Clock:        r.clock,
		NewID:        func() string { return fmt.Sprintf("dst-%d", r.ids.Add(1)) },
		Observer:     p.track,
		Interleaver:  r.interleave,
		Logger:       slog.New(slog.DiscardHandler),
	}
	cfg.SnapshotEvery = r.cfg.SnapshotEvery
	if !r.cfg.StickyParks {
		cfg.StickyParks = -1
	}
	if r.cfg.Leases {
		cfg.Leases = &leaseView{r: r, p: p, inner: r.leases}
		cfg.Heartbeat = -1
	}
	if r.sim.Configure != nil {
		r.sim.Configure(&cfg)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		panic("dst: building a runtime: " + err.Error()) // the config is the simulator's own
	}
	r.proc, r.rt = p, rt
}

// restart ends the running process as a crash does (it is dead already,
// or killed now) and starts the next one on the surviving stores, which
// then recovers.
func (r *run) restart() {
	r.proc.kill()
	_ = r.rt.Close() // Close reports nothing but success
	r.settleLeases()
	r.startProcess()
	r.note("  restart: process %d", r.procs)
	r.recoverPass()
	r.pendingRecovery = true
}

// settleLeases gives up, for the dead process, the leases it held on
// executions at rest. A drive releases its lease once its park is
// durable, after the simulator's wait for the park returns, so whether a
// process killed at rest got to it is the scheduler's: the simulator
// settles it the way it nearly always goes. A dead process's lease on an
// execution it was driving stays, for the next process to wait out.
func (r *run) settleLeases() {
	if !r.cfg.Leases {
		return
	}
	w, err := r.look()
	if err != nil {
		return
	}
	ctx, cancel := r.callCtx()
	defer cancel()
	for _, x := range w.execs {
		if x.running() {
			continue
		}
		if l, ok, err := r.leases.Get(ctx, x.ID); err == nil && ok && l.Owner == r.proc.node {
			_ = r.leases.Release(ctx, l) // releasing a lease already lost is no error
		}
	}
}

// recoverPass runs one Runtime.Recover in the live process.
func (r *run) recoverPass() {
	ctx, cancel := r.callCtx()
	defer cancel()
	var n int
	err := r.call("Recover", "", func() (err error) {
		n, err = r.rt.Recover(ctx)
		return err
	})
	switch {
	case err != nil:
		r.note("  recover: %v", err)
	case n > 0:
		r.note("  recovered %d", n)
	}
}

// leaseWait finishes a restart's recovery: with leases, a dead process's
// live lease (or, for an execution it never leased, its recent activity)
// keeps the next process from re-driving an execution until a lease TTL
// has passed, so the clock moves that far and recovery runs again.
func (r *run) leaseWait(w world) bool {
	if !r.cfg.Leases {
		return false
	}
	blocked := false
	for _, x := range w.execs {
		if x.running() && !r.proc.track.isLive(x.ID) {
			blocked = true
		}
	}
	if !blocked {
		return false
	}
	r.clock.advanceTo(r.clock.Now().Add(leaseTTL + time.Millisecond))
	r.note("  waited out the dead process's leases (%s)", leaseTTL)
	r.recoverPass()
	return true
}

// leaseTTL is the runtime's default loom.Config.LeaseTTL.
const leaseTTL = 30 * time.Second
