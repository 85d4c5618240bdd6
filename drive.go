package loom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/divergence"
	"github.com/loom-kernel/loom/internal/journal"
)

// drive is one drive of an execution: the flow body executed from the top
// over its journal, serving recorded outcomes and recording new ones.
type drive struct {
	rt       *Runtime
	x        *execution
	j        *journal.Journal
	flow     *Flow
	ctx      context.Context
	cancel   context.CancelFunc
	simulate bool
	root     *scope

	mu         sync.Mutex
	parked     bool  // this run committed EXECUTION_SUSPENDED
	cancelled  bool  // Cancel committed EXECUTION_CANCELLED
	abortErr   error // a journal failure: no terminal event is written
	gates      int   // gate passthroughs consumed: the ADR 0102 segment
	emitCount  map[string]int
	inFlight   int // effects and deciders executing now
	div        *divergence.Detector
	snapshotAt int64      // sequence of the last park snapshot this run saved, -1 if none
	successor  *successor // set by ContinueAsNew: the execution to start next
	// issued holds the step and decision ids this drive has issued, with
	// the digest of each step's input: a second call of an id with another
	// input is refused (StepReusedError) instead of served the first one's
	// outcome.
	issued map[string]issue
	// verify, set by CheckReplay, stops the drive at the first thing the
	// log does not hold (see reach).
	verify *verifier
	// patches holds the versions Version gave this drive without a
	// recorded decision (an execution older than the patch).
	patches map[string]int
	// awaited holds the children this drive's flow awaited.
	awaited map[string]bool
	// turns runs Parallel branches one at a time under Config.Interleaver.
	turns *turns
}

// issue is an id a drive issued.
type issue struct {
	decision bool
	input    string // canonical digest of a step's input
}

// reissue records that the drive issues id (a step with input, or a
// decision) and refuses a reuse: a step id issued before with another
// input, or a decision id decided before in this drive.
func (r *drive) reissue(id string, decision bool, input json.RawMessage) error {
	digest := ""
	if !decision {
		digest = inputDigest(input)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.issued[id]
	switch {
	case !seen:
		r.issued[id] = issue{decision: decision, input: digest}
		return nil
	case decision || prev.decision:
		return &StepReusedError{ID: id, Kind: "decision"}
	case prev.input != digest:
		return &StepReusedError{ID: id, Kind: "step"}
	}
	return nil
}

// inputDigest identifies a step input by its canonical JSON, so key order
// and spacing do not count as a different input.
func inputDigest(in json.RawMessage) string {
	c, err := event.Canonical(orNull(in))
	if err != nil {
		c = orNull(in)
	}
	return event.SHA256(c)
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

func (r *drive) stopped() bool { return r.root.stop.Load() }

// isParked reports whether the run committed its park and waits (sticky)
// or unwinds.
func (r *drive) isParked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parked
}

// abort ends the drive after a journal failure: the execution stays as the
// log has it (running), for Recover to re-drive.
func (r *drive) abort(err error) {
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
func (r *drive) commit(typ string, payload any, meta map[string]json.RawMessage) event.Envelope {
	if r.verifying() {
		r.reach(frontier{kind: frontierAppend, typ: typ})
	}
	e, err := r.j.Commit(typ, payload, meta)
	if err != nil {
		r.abort(err)
	}
	return e
}

func (r *drive) barrier() {
	if err := r.j.Barrier(context.Background()); err != nil {
		r.abort(err)
	}
}

// beginLive and endLive bracket an effect or decider of c executing live.
func (r *drive) beginLive(c *Context) {
	r.mu.Lock()
	r.inFlight++
	c.causal.live = true
	r.mu.Unlock()
}

func (r *drive) endLive(c *Context, unservedOutcome bool) {
	r.mu.Lock()
	r.inFlight--
	if unservedOutcome {
		c.causal.unserved = true
	}
	r.mu.Unlock()
}

// outcome is how a drive ended.
type outcome struct {
	status fold.Status // suspended, completed, failed, cancelled; "" when aborted
	err    error       // the abort's journal error
}

// runBody runs the flow body in its own goroutine, so a suspend can unwind
// it with runtime.Goexit, then records how it ended.
func (r *drive) runBody(input json.RawMessage) outcome {
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
		c := &Context{drive: r, clocks: &branchCounters{}, scope: r.root, causal: &causal{}}
		out, err = r.flow.Body(c, input)
		if werr := r.awaitWaitChildren(c); werr != nil && err == nil {
			err = werr
		}
		returned = true
	}()
	<-done
	r.mu.Lock()
	parked, cancelled, abortErr := r.parked, r.cancelled, r.abortErr
	r.mu.Unlock()
	switch {
	case r.verifying() && r.verify.reached() != nil:
		return outcome{}
	case abortErr != nil:
		return outcome{err: abortErr}
	case cancelled:
		return outcome{status: fold.StatusCancelled}
	case r.successor != nil:
		return outcome{status: fold.StatusContinued}
	case parked:
		if e := r.j.Barrier(context.Background()); e != nil {
			return outcome{err: e}
		}
		return outcome{status: fold.StatusSuspended}
	case panicked != nil:
		err = newPanicError(panicked)
	case !returned:
		// The body called runtime.Goexit itself: treat as a failure.
		err = fmt.Errorf("flow goroutine exited without returning")
	}
	if err != nil {
		return r.finish(event.ExecutionFailed, map[string]any{"error": errorPayload(err)}, fold.StatusFailed)
	}
	raw, merr := json.Marshal(out)
	if merr == nil {
		merr = event.ValidateCarried("output", raw)
	}
	if merr != nil {
		return r.finish(event.ExecutionFailed, map[string]any{"error": errorPayload(fmt.Errorf("encoding output: %w", merr))}, fold.StatusFailed)
	}
	return r.finish(event.ExecutionCompleted, map[string]any{"output": json.RawMessage(raw)}, fold.StatusCompleted)
}

// finish commits the terminal event and waits until it is durable.
func (r *drive) finish(typ string, payload any, status fold.Status) outcome {
	if r.verifying() {
		r.verify.record(frontier{kind: frontierEnd, typ: typ, payload: payload, status: status})
		return outcome{}
	}
	if _, err := r.j.CommitTerminal(typ, payload, nil); err != nil {
		return outcome{err: err}
	}
	if err := r.j.Barrier(context.Background()); err != nil {
		return outcome{err: err}
	}
	return outcome{status: status}
}

// errorPayload is the recorded shape of an untyped error: its message, and
// the typed channel when there is one.
func errorPayload(err error) map[string]any {
	var cf *ChildFailedError
	if errors.As(err, &cf) {
		return childErrorPayload(cf, err.Error())
	}
	p := map[string]any{"message": err.Error()}
	if tf, ok := asTypedFailure(err); ok {
		p["channel"] = tf.Channel
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		p["stack"] = pe.Stack
	}
	return p
}
