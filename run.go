package loom

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// run is one drive of an execution: the flow body executed from the top
// over its journal, serving recorded outcomes and recording new ones.
type run struct {
	rt       *Runtime
	x        *execution
	j        *journal
	flow     *Flow
	ctx      context.Context
	cancel   context.CancelFunc
	simulate bool
	root     *scope

	mu          sync.Mutex
	parked      bool  // this run committed EXECUTION_SUSPENDED
	cancelled   bool  // Cancel committed EXECUTION_CANCELLED
	abortErr    error // a journal failure: no terminal event is written
	gates       int   // gate passthroughs consumed: the ADR 0102 segment
	segmentLive bool  // a step or decision of the current segment ran live
	emitCount   map[string]int
	inFlight    int  // effects and deciders executing now
	unserved    bool // an earlier step/decider ended in an outcome replay does not serve
	div         *divergence
	snapshotAt  int64      // sequence of the last park snapshot this run saved, -1 if none
	successor   *successor // set by ContinueAsNew: the execution to start next
}

// scope is a Parallel block's stop signal and context; the run's root scope
// stops the whole run (a park, a cancel, an abort). A failing branch stops
// its scope and cancels the scope's context, so its siblings' running
// effects see the cancellation and no sibling starts another syscall.
type scope struct {
	parent *scope
	stop   atomic.Bool
	ctx    context.Context
	cancel context.CancelFunc
}

// fail stops the scope and cancels the effects running under it.
func (s *scope) fail() {
	s.stop.Store(true)
	s.cancel()
}

func (s *scope) stopped() bool {
	for ; s != nil; s = s.parent {
		if s.stop.Load() {
			return true
		}
	}
	return false
}

func (r *run) stopped() bool { return r.root.stop.Load() }

// isParked reports whether the run committed its park and waits (sticky)
// or unwinds.
func (r *run) isParked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parked
}

// abort ends the run after a journal failure: the execution stays as the
// log has it (running), for Recover to re-drive.
func (r *run) abort(err error) {
	r.mu.Lock()
	if r.abortErr == nil && !r.cancelled {
		r.abortErr = err
	}
	r.mu.Unlock()
	r.root.stop.Store(true)
	runtime.Goexit()
}

// commit appends through the journal; a refused commit (journal failure,
// or a run already ended by a cancel) unwinds the caller.
func (r *run) commit(typ string, payload any, meta map[string]json.RawMessage) event.Envelope {
	e, err := r.j.commit(typ, payload, meta)
	if err != nil {
		r.abort(err)
	}
	return e
}

func (r *run) barrier() {
	if err := r.j.barrier(context.Background()); err != nil {
		r.abort(err)
	}
}

// beginLive and endLive bracket an effect or decider executing live.
func (r *run) beginLive() {
	r.mu.Lock()
	r.inFlight++
	r.segmentLive = true
	r.mu.Unlock()
}

func (r *run) endLive(unservedOutcome bool) {
	r.mu.Lock()
	r.inFlight--
	if unservedOutcome {
		r.unserved = true
	}
	r.mu.Unlock()
}

// outcome is how a drive ended.
type outcome struct {
	status fold.Status // suspended, completed, failed, cancelled; "" when aborted
	err    error       // the abort's journal error
}

// execute runs the flow body in its own goroutine, so a suspend can unwind
// it with runtime.Goexit, then records how it ended.
func (r *run) execute(input json.RawMessage) outcome {
	var (
		out      any
		err      error
		returned bool
		panicked any
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		c := &Context{run: r, clocks: &branchCounters{}, scope: r.root}
		out, err = r.flow.Body(c, input)
		returned = true
	}()
	<-done
	r.mu.Lock()
	parked, cancelled, abortErr := r.parked, r.cancelled, r.abortErr
	r.mu.Unlock()
	switch {
	case abortErr != nil:
		return outcome{err: abortErr}
	case cancelled:
		return outcome{status: fold.StatusCancelled}
	case r.successor != nil:
		return outcome{status: fold.StatusContinued}
	case parked:
		if e := r.j.barrier(context.Background()); e != nil {
			return outcome{err: e}
		}
		return outcome{status: fold.StatusSuspended}
	case panicked != nil:
		err = fmt.Errorf("panic: %v", panicked)
	case !returned:
		// The body called runtime.Goexit itself: treat as a failure.
		err = fmt.Errorf("flow goroutine exited without returning")
	}
	if err != nil {
		return r.finish(event.ExecutionFailed, map[string]any{"error": errorPayload(err)}, fold.StatusFailed)
	}
	raw, merr := json.Marshal(out)
	if merr != nil {
		return r.finish(event.ExecutionFailed, map[string]any{"error": errorPayload(fmt.Errorf("encoding output: %w", merr))}, fold.StatusFailed)
	}
	return r.finish(event.ExecutionCompleted, map[string]any{"output": json.RawMessage(raw)}, fold.StatusCompleted)
}

// finish commits the terminal event and waits until it is durable.
func (r *run) finish(typ string, payload any, status fold.Status) outcome {
	if _, err := r.j.commitTerminal(typ, payload, nil); err != nil {
		return outcome{err: err}
	}
	if err := r.j.barrier(context.Background()); err != nil {
		return outcome{err: err}
	}
	return outcome{status: status}
}

// errorPayload is the recorded shape of an untyped error: its message, and
// the typed channel when there is one.
func errorPayload(err error) map[string]any {
	p := map[string]any{"message": err.Error()}
	if tf, ok := asTypedFailure(err); ok {
		p["channel"] = tf.Channel
	}
	return p
}
