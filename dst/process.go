package dst

import (
	"errors"
	"fmt"
	"sync"

	"github.com/loom-kernel/loom/store"
)

// ErrCrashed is what every call of a crashed process returns: the append
// a FaultCrash hit, every later call about its execution, and every call
// at all once the process has died. The runtime reports it wrapped, so
// match it with errors.Is.
var ErrCrashed = errors.New("dst: process crashed")

// ErrRejected is the transient store error of a FaultReject.
var ErrRejected = errors.New("dst: append rejected (injected transient store error)")

// ErrSnapshotFault is the error of a FaultSnapshot.
var ErrSnapshotFault = errors.New("dst: snapshot save failed (injected)")

// process is one simulated OS process: the views of the durable stores
// its runtime is built on, which fail like a killed process's once it
// dies, and the drive tracker of its runtime.
//
// A crash (at an append, or inside an effect) stops that execution at
// once — every later call about it fails, so nothing more of it becomes
// durable, though its flow goroutine runs on until its next durable point
// — and leaves the process dying: its other drives run on to their next
// rest point, and then the process dies whole. That is the interleaving
// of a real crash in which the other drives were idle when it came;
// killing them mid-step too would make the outcome depend on the Go
// scheduler (see the package docs).
type process struct {
	n     int
	node  string
	track *tracker

	mu       sync.Mutex
	dead     bool
	stopped  map[string]bool // executions a crash stopped: the process is dying
	budget   int             // timers Due may still hand out; negative: no bound
	wake     store.Broadcaster
	leaseOff map[faultKey]bool // leases a FaultLeaseExpiry shows as expired
}

func newProcess(n int) *process {
	return &process{n: n, node: fmt.Sprintf("dst-node-%d", n), track: newTracker(), stopped: map[string]bool{}, budget: -1,
		leaseOff: map[faultKey]bool{}}
}

// check refuses a call about exec once the process (or that execution) is
// dead.
func (p *process) check(exec string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead || p.stopped[exec] {
		return ErrCrashed
	}
	return nil
}

// checkAll refuses a call about no execution in particular once the
// process is dead.
func (p *process) checkAll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return ErrCrashed
	}
	return nil
}

// stop kills exec's part of the process: a crash hit its append.
func (p *process) stop(exec string) {
	p.mu.Lock()
	p.stopped[exec] = true
	p.mu.Unlock()
	p.wake.Notify(exec) // its followers re-read, fail and end
}

// isStopped reports whether calls about exec fail.
func (p *process) isStopped(exec string) bool { return p.check(exec) != nil }

// dying reports whether a crash hit the process and it has not died yet.
func (p *process) dying() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead && len(p.stopped) > 0
}

// isDead reports whether the process has died.
func (p *process) isDead() bool { return p.checkAll() != nil }

// kill kills the whole process; every later call fails.
func (p *process) kill() {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	p.wake.NotifyAll()
}

// setBudget bounds the timers the timer view's Due hands out from now on
// (negative: no bound).
func (p *process) setBudget(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.budget = n
}

// takeBudget returns how many timers Due may hand out now, at most limit.
func (p *process) takeBudget(limit int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.budget < 0 {
		return limit
	}
	return min(limit, p.budget)
}

// spendBudget counts n timers handed out.
func (p *process) spendBudget(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.budget > 0 {
		p.budget = max(p.budget-n, 0)
	}
}
