package loom

import (
	"context"
	"runtime"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom/fold"
)

// Context is the syscall surface a flow sees (spec §2, KernelSyscalls):
// Execute/Run, Decide, Parallel, Suspend, Sleep/SleepUntil, Emit/Stream,
// NegotiateBudget, ContinueAsNew, Receive and Select — plus the recorded
// helpers Now and Random. Every durable syscall first consults the folded
// log, so a replay serves what already happened and runs only what did not.
//
// A Context is bound to one run of one execution. Call its syscalls from the
// flow's goroutine or from a Parallel branch, never from goroutines of your
// own: a suspend or a failure unwinds the calling goroutine.
type Context struct {
	drive  *drive
	branch string // "" for the root, "0", "0.1"… for Parallel branches
	clocks *branchCounters
	scope  *scope // stops this goroutine when its Parallel block or run stops
	block  *idSet // step ids of the enclosing root-level Parallel block
	// causal is what this goroutine of the flow has seen happen before it
	// in the current segment (guarded by drive.mu).
	causal *causal
}

// causal is what came before a point of a flow's code, for the emit rules
// of ADR 0102: a step or decision of the current segment ran live, and an
// outcome replay does not serve ended. A Parallel branch starts from its
// parent's and the parent takes its branches' in at the join, so what an
// emit decides follows the code order of its own branch, never how
// branches happen to interleave (spec §3, "never timing").
type causal struct{ live, unserved bool }

// branchCounters mint deterministic ids for a branch's implicit decisions
// (loom.Now, loom.Random, NegotiateBudget) independently of interleaving.
type branchCounters struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *branchCounters) next(kind string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	i := b.n[kind]
	b.n[kind] = i + 1
	return i
}

// ExecutionID returns the id of the execution this run drives.
func (c *Context) ExecutionID() string { return c.drive.x.id }

// Context returns the context.Context of this goroutine's scope: cancelled
// when the execution is cancelled, the runtime closes, or a sibling Parallel
// branch fails. Pass it to code that blocks.
func (c *Context) Context() context.Context { return c.scope.ctx }

// Simulating reports whether this run is a simulation (a fork resumed with
// Simulate): steps run their simulation, or for real only when read-only.
func (c *Context) Simulating() bool { return c.drive.simulate }

// implicitID names the n-th implicit decision of kind in this branch.
func (c *Context) implicitID(kind string) string {
	id := reservedPrefix + kind
	if c.branch != "" {
		id += "@" + c.branch
	}
	return id + "#" + strconv.Itoa(c.clocks.next(kind))
}

// child returns the Context of Parallel branch i of c, stopped by sc.
func (c *Context) child(i int, sc *scope, block *idSet) *Context {
	b := strconv.Itoa(i)
	if c.branch != "" {
		b = c.branch + "." + b
	}
	c.drive.mu.Lock()
	inherited := *c.causal
	c.drive.mu.Unlock()
	return &Context{drive: c.drive, branch: b, clocks: &branchCounters{}, scope: sc, block: block, causal: &inherited}
}

// checkpoint is called at the start of every syscall: a sibling's suspend
// or failure, a cancel or a journal failure stops this goroutine here.
func (c *Context) checkpoint() {
	if t := c.drive.turns; t != nil {
		t.yield(c.branch)
	}
	if c.scope.stopped() {
		runtime.Goexit()
	}
}

// state reads the folded state under the journal lock.
func (c *Context) state(f func(s *fold.State)) { c.drive.j.Read(f) }
