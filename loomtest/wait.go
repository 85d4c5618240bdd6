package loomtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// The waits follow the durable log: each folds the execution's events as
// the store acknowledges them and stops at the first state its condition
// accepts, so it sees only what survives a crash, and an execution driven
// by any process. A condition that becomes impossible (the execution ended
// elsewhere) fails at once; one that never comes fails when the wait's
// bound passes (Env.Context): either way with the execution's status and
// its last events, never a hang.

// lastEvents is how many of the last events a failed wait shows.
const lastEvents = 8

// maxShownPayload bounds each payload a failed wait shows.
const maxShownPayload = 240

// verdict is a wait condition's answer to one state: done, or impossible
// (a non-empty reason), or neither (wait on).
type verdict struct {
	done       bool
	impossible string
}

// waitFor follows id's log until cond says done, and returns the state. It
// fails t when cond says impossible or the bound passes, describing what
// was awaited.
func (e *Env) waitFor(t testing.TB, id, what string, cond func(fold.State) verdict) fold.State {
	t.Helper()
	ctx, cancel := e.Context(t)
	defer cancel()
	st, log, err := e.follow(ctx, id, cond)
	if err == nil {
		return st
	}
	t.Fatalf("loomtest: execution %q: waiting until %s: %v\n%s", id, what, err, describe(st, log))
	return st
}

// errImpossible carries a condition's impossibility.
type errImpossible string

func (e errImpossible) Error() string { return string(e) }

// follow folds id's log until cond is done or impossible, or ctx ends; it
// returns the state and the events read.
func (e *Env) follow(ctx context.Context, id string, cond func(fold.State) verdict) (fold.State, []event.Envelope, error) {
	log, err := e.events.ReadFrom(ctx, id, 0)
	if err != nil {
		return fold.Initial(), nil, err
	}
	// The condition is asked of the state now, then of each state after
	// it: a wait begun after a resume must not stop at the park the resume
	// answered.
	st := fold.Fold(log)
	if len(log) > 0 {
		switch v := cond(st); {
		case v.done:
			return st, log, nil
		case v.impossible != "":
			return st, log, errImpossible(v.impossible)
		}
	}
	sub, err := e.events.Subscribe(ctx, id, int64(len(log)))
	if err != nil {
		return st, log, err
	}
	defer sub.Close()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					return st, log, err
				}
				return st, log, timedOut(ctx)
			}
			log = append(log, ev)
			st = fold.Apply(st, ev)
			v := cond(st)
			switch {
			case v.done:
				return st, log, nil
			case v.impossible != "":
				return st, log, errImpossible(v.impossible)
			}
		case <-ctx.Done():
			return st, log, timedOut(ctx)
		}
	}
}

// timedOut says why a wait ended without its condition.
func timedOut(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("it did not happen before the wait's bound (WithWaitTimeout, the test's deadline)")
	}
	return fmt.Errorf("the wait ended: %w", ctx.Err())
}

// describe renders a state and the last events of its log for a failure.
func describe(st fold.State, log []event.Envelope) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  status: %s", orNone(string(st.Status)))
	if s := st.Variables.SuspendedOn; s != nil && st.Status == fold.StatusSuspended {
		fmt.Fprintf(&b, ", parked on %q", s.On)
	}
	if len(st.Variables.Error) > 0 {
		fmt.Fprintf(&b, ", error %s", clip(st.Variables.Error))
	}
	fmt.Fprintf(&b, "\n  events: %d", len(log))
	if len(log) == 0 {
		b.WriteString(" (the execution has no durable event: never started, or started in another Env?)")
	}
	from := max(len(log)-lastEvents, 0)
	if from > 0 {
		fmt.Fprintf(&b, ", the last %d:", lastEvents)
	}
	for _, ev := range log[from:] {
		fmt.Fprintf(&b, "\n    #%d %s %s", ev.Sequence, ev.Type, clip(ev.PayloadOrNull()))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// clip bounds a payload for a message.
func clip(raw []byte) string {
	s := string(raw)
	if len(s) > maxShownPayload {
		return s[:maxShownPayload] + "…"
	}
	return s
}

// parkedOn is the gate a state is parked on, "" when it is not parked.
func parkedOn(st fold.State) string {
	if st.Status != fold.StatusSuspended || st.Variables.SuspendedOn == nil {
		return ""
	}
	return st.Variables.SuspendedOn.On
}

// WaitForGate waits until execution id is parked on gate and returns its
// state. It fails t when the execution ends first, or the gate does not
// come within the wait's bound (a park on another gate waits on: a timer
// or an answer may move it).
func (e *Env) WaitForGate(t testing.TB, id, gate string) fold.State {
	t.Helper()
	return e.waitFor(t, id, fmt.Sprintf("it parks on gate %q", gate), func(st fold.State) verdict {
		switch {
		case parkedOn(st) == gate:
			return verdict{done: true}
		case st.Status.Terminal():
			return verdict{impossible: fmt.Sprintf("it ended %s without parking on the gate", st.Status)}
		}
		return verdict{}
	})
}

// WaitForStep waits until step stepID of execution id has a durable
// outcome (completed, failed or cancelled) and returns its frame. It fails
// t when the execution ends without one, or the bound passes.
func (e *Env) WaitForStep(t testing.TB, id, stepID string) fold.Frame {
	t.Helper()
	st := e.waitFor(t, id, fmt.Sprintf("step %q has an outcome", stepID), func(st fold.State) verdict {
		switch {
		case st.Frames[stepID].Status.Settled():
			return verdict{done: true}
		case st.Status.Terminal():
			return verdict{impossible: fmt.Sprintf("it ended %s without an outcome of the step", st.Status)}
		}
		return verdict{}
	})
	return st.Frames[stepID]
}

// WaitForCompletion waits until execution id completes and returns its
// result. It fails t when it fails, is cancelled or continues instead, or
// the bound passes.
func (e *Env) WaitForCompletion(t testing.TB, id string) loom.Result {
	t.Helper()
	st := e.waitFor(t, id, "it completes", func(st fold.State) verdict {
		switch {
		case st.Status == fold.StatusCompleted:
			return verdict{done: true}
		case st.Status.Terminal():
			return verdict{impossible: fmt.Sprintf("it ended %s", st.Status)}
		}
		return verdict{}
	})
	return loom.Result{Status: st.Status, Output: st.Variables.Output, State: st}
}

// WaitForFailure waits until execution id fails and returns its state (the
// recorded error in Variables.Error). It fails t when it ends otherwise, or
// the bound passes.
func (e *Env) WaitForFailure(t testing.TB, id string) fold.State {
	t.Helper()
	return e.waitFor(t, id, "it fails", func(st fold.State) verdict {
		switch {
		case st.Status == fold.StatusFailed:
			return verdict{done: true}
		case st.Status.Terminal():
			return verdict{impossible: fmt.Sprintf("it ended %s", st.Status)}
		}
		return verdict{}
	})
}

// WaitForSettled waits until execution id is parked (on any gate) or has
// ended, and returns its state. It fails t when the bound passes.
func (e *Env) WaitForSettled(t testing.TB, id string) fold.State {
	t.Helper()
	return e.waitFor(t, id, "it parks or ends", settled)
}

func settled(st fold.State) verdict {
	return verdict{done: st.Status == fold.StatusSuspended || st.Status.Terminal()}
}
