package loom

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Result is how an execution ended.
type Result struct {
	Status fold.Status
	Output json.RawMessage
	State  fold.State
}

// WaitForCompletion blocks until the execution ends (completed, failed,
// cancelled or continued) and returns its result; for a failed execution the
// error is a *FlowFailedError. It follows the log, so it sees an execution
// driven by any process, and only what is durable.
func (rt *Runtime) WaitForCompletion(ctx context.Context, id string) (Result, error) {
	st, err := rt.waitFor(ctx, id, true, func(s *fold.State) (bool, error) { return s.Status.Terminal(), nil })
	if err != nil {
		return Result{}, err
	}
	res := Result{Status: st.Status, Output: st.Variables.Output, State: st}
	if st.Status == fold.StatusFailed {
		return res, &FlowFailedError{ExecutionID: id, Message: errorMessage(st.Variables.Error)}
	}
	return res, nil
}

// WaitForChain follows a chain of continue-as-new links from id and waits
// for the execution that ends it (completed, failed or cancelled); a
// successor not started yet is waited for. It follows at most
// MaxChainWaitHops links in one call, then returns the continued result it
// reached with *ChainTooLongError: call it again from
// Result.State.Variables.ContinuedTo to go on.
func (rt *Runtime) WaitForChain(ctx context.Context, id string) (Result, error) {
	ctx = context.WithValue(ctx, awaitMissingKey{}, true)
	for hops := 0; ; hops++ {
		res, err := rt.WaitForCompletion(ctx, id)
		if err != nil || res.Status != fold.StatusContinued || res.State.Variables.ContinuedTo == "" {
			return res, err
		}
		if hops+1 >= MaxChainWaitHops {
			return res, &ChainTooLongError{ExecutionID: id, Hops: MaxChainWaitHops}
		}
		id = res.State.Variables.ContinuedTo
	}
}

// MaxChainWaitHops bounds the continue-as-new links one WaitForChain
// follows.
const MaxChainWaitHops = 10_000

type awaitMissingKey struct{}

func awaitMissing(ctx context.Context) bool { v, _ := ctx.Value(awaitMissingKey{}).(bool); return v }

// WaitForSuspend blocks until the execution is parked and returns its state.
// An execution that ends instead rejects with *ExecutionTerminatedError (ADR
// 0135), never a wait that does not end.
func (rt *Runtime) WaitForSuspend(ctx context.Context, id string) (fold.State, error) {
	return rt.waitFor(ctx, id, false, func(s *fold.State) (bool, error) {
		if s.Status.Terminal() {
			return true, &ExecutionTerminatedError{ExecutionID: id, Status: s.Status, State: *s}
		}
		return s.Status == fold.StatusSuspended, nil
	})
}

// WaitForSettled blocks until the execution is parked or has ended, and
// returns its state: what a caller that resumed an execution usually wants.
func (rt *Runtime) WaitForSettled(ctx context.Context, id string) (fold.State, error) {
	return rt.waitFor(ctx, id, false, func(s *fold.State) (bool, error) {
		return s.Status.Terminal() || s.Status == fold.StatusSuspended, nil
	})
}

// waitFor folds the durable log forward until done says so. untilDriveEnds
// lets it first wait for this process's drive to end, which suits a wait
// for the end only: a park is durable before the drive's in-flight siblings
// finish.
func (rt *Runtime) waitFor(ctx context.Context, id string, untilDriveEnds bool, done func(*fold.State) (bool, error)) (fold.State, error) {
	if err := event.ValidateID("execution id", id); err != nil {
		return fold.State{}, err
	}
	if err := rt.authorize(ctx, "query", id, "", true); err != nil {
		return fold.State{}, err
	}
	// Driven here: the drive's own end is the cheapest signal, and the only
	// one of a drive that stops without an outcome (nothing more reaches the
	// log then, so following it alone would wait forever).
	x := rt.liveExecution(id)
	if x != nil && untilDriveEnds {
		select {
		case <-x.done:
		case <-ctx.Done():
			return fold.State{}, ctx.Err()
		}
		if x.settled {
			if ok, err := done(&x.final); ok || err != nil {
				return x.final, err
			}
		}
	}
	l, err := rt.load(ctx, id)
	if errors.Is(err, ErrExecutionNotFound) && awaitMissing(ctx) {
		l, err = loaded{state: fold.Initial()}, nil // not started yet: follow it from its first event
	}
	if err != nil {
		return fold.State{}, err
	}
	f := fold.NewFolder(l.state)
	if ok, err := done(f.Peek()); ok || err != nil {
		return f.State(), err
	}
	if x != nil && isDone(x.done) && x.abortErr != nil {
		return fold.State{}, x.abortErr
	}
	if x == nil {
		if err := rt.abortOf(id); err != nil {
			return fold.State{}, err
		}
	}
	sub, ok := rt.cfg.Events.(store.Subscriber)
	if !ok {
		return fold.State{}, &NotConfiguredError{Field: "Events (an event store that implements store.Subscriber)", Need: "waiting for an execution"}
	}
	s, err := sub.Subscribe(ctx, id, l.state.Sequence+1)
	if err != nil {
		return fold.State{}, err
	}
	defer s.Close()
	var driveEnded <-chan struct{}
	if x != nil {
		driveEnded = x.done
	}
	for {
		select {
		case e, ok := <-s.Events():
			if !ok {
				if err := s.Err(); err != nil {
					return fold.State{}, err
				}
				return fold.State{}, ctx.Err()
			}
			if err := f.ApplyChecked(e); err != nil {
				return fold.State{}, err
			}
			if ok, err := done(f.Peek()); ok || err != nil {
				return f.State(), err
			}
		case <-driveEnded:
			driveEnded = nil
			if x.abortErr == nil {
				continue // it parked or ended: the log says how
			}
			// The drive stopped without an outcome. What it made durable
			// first still counts.
			tail, err := rt.cfg.Events.ReadFrom(ctx, id, f.Peek().Sequence+1)
			if err != nil {
				return fold.State{}, err
			}
			for _, e := range tail {
				if err := f.ApplyChecked(e); err != nil {
					return fold.State{}, err
				}
				if ok, err := done(f.Peek()); ok || err != nil {
					return f.State(), err
				}
			}
			return fold.State{}, x.abortErr
		}
	}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if unmarshalRecorded(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(raw)
}
