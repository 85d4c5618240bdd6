package loom

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Parallel runs branches as goroutines under structured concurrency: it
// returns only when every branch has ended, and no branch outlives it. A
// suspend in one branch parks the run (the siblings stop at their next
// syscall, the flow unwinds once all have); a failure stops the siblings the
// same way, cancels the context their running effects see, and Parallel
// returns the failure of the lowest-index failed
// branch, which the flow may handle. A branch's panic is its failure.
//
// Replay serves steps by id, so branches may interleave differently on every
// run without changing the outcome.
func (c *Context) Parallel(branches ...func(ctx *Context) error) error {
	c.checkpoint()
	r := c.drive
	var scopeID string
	if r.rt.cfg.Features.Scopes {
		scopeID = c.implicitID("scope")
	}
	sctx, cancel := context.WithCancel(c.scope.ctx)
	defer cancel()
	sc := &scope{parent: c.scope, ctx: sctx, cancel: cancel}
	block := c.block
	rootBlock := block == nil
	if rootBlock {
		block = &idSet{ids: map[string]bool{}}
	}
	errs := make([]error, len(branches))
	children := make([]*Context, len(branches))
	for i := range branches {
		children[i] = c.child(i, sc, block)
	}
	// Under an Interleaver the branches run one at a time: each waits for
	// its turn before it starts, and the last one's end gives it back here.
	var start []chan struct{}
	var resume chan struct{}
	if r.turns != nil && len(children) > 0 {
		paths := make([]string, len(children))
		for i, ch := range children {
			paths[i] = ch.branch
		}
		start, resume = r.turns.fork(c.branch, paths)
	}
	var wg sync.WaitGroup
	for i, branch := range branches {
		child := children[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if start != nil {
				<-start[i]
				defer r.turns.exit(c.branch)
			}
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("loom: parallel branch %d panicked: %v", i, p)
					sc.fail()
				}
			}()
			if err := branch(child); err != nil {
				errs[i] = err
				sc.fail()
			}
		}()
	}
	if resume != nil {
		<-resume
	}
	wg.Wait()
	// The join: what the branches saw happen, the flow has seen too.
	r.mu.Lock()
	for _, ch := range children {
		c.causal.live = c.causal.live || ch.causal.live
		c.causal.unserved = c.causal.unserved || ch.causal.unserved
	}
	r.mu.Unlock()
	if c.scope.stopped() {
		runtime.Goexit() // the run parked, was cancelled or aborted
	}
	if rootBlock {
		r.endBlock(block)
	}
	var failed error
	nFailed := 0
	for _, err := range errs {
		if err != nil {
			nFailed++
			if failed == nil {
				failed = err
			}
		}
	}
	if r.rt.cfg.Features.Scopes {
		c.recordScope(scopeID, len(branches), nFailed)
	}
	return failed
}

// recordScope records a finished Parallel block as a kernel-stamped
// PARALLEL_COMPLETED, once per execution (a replay finds it in _scopes).
func (c *Context) recordScope(id string, branches, failed int) {
	var done bool
	c.state(func(s *fold.State) { _, done = s.Variables.Scopes[id] })
	if done {
		return
	}
	status := "completed"
	if failed > 0 {
		status = "failed"
	}
	c.drive.commit(event.ParallelCompleted,
		map[string]any{"scopeId": id, "status": status, "branches": branches, "failed": failed}, kernelStamp())
}

// Parallel is the typed form of Context.Parallel: each branch returns a
// value, collected in branch order.
func Parallel[T any](ctx *Context, branches ...func(ctx *Context) (T, error)) ([]T, error) {
	out := make([]T, len(branches))
	fns := make([]func(*Context) error, len(branches))
	for i, b := range branches {
		fns[i] = func(c *Context) error {
			v, err := b(c)
			out[i] = v
			return err
		}
	}
	if err := ctx.Parallel(fns...); err != nil {
		return nil, err
	}
	return out, nil
}
