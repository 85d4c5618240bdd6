package crashtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Case is one cell of the matrix.
type Case struct {
	Durability loom.Durability
	// KillAfter is the number of events durably appended before the
	// process dies (>= 1: EXECUTION_STARTED always survives). A value at or
	// past the run's length loses nothing.
	KillAfter int
	// Recovery, when set, decorates the stores the recovering runtime sees.
	// The matrix never sets it; the kit's self-test uses it to break
	// recovery on purpose and show that Check notices.
	Recovery func(Stores) Stores
}

// Name is the case's name in reports: "<durability>/kill-after-<n>".
func (c Case) Name() string { return DurabilityName(c.Durability) + "/" + c.point() }

// point names the append point: "kill-after-<n>".
func (c Case) point() string { return fmt.Sprintf("kill-after-%02d", c.KillAfter) }

// crashed is what the crashed process left behind.
type crashed struct {
	log    []event.Envelope // the durable log once runtime A has closed
	counts map[string]int64 // invocations during runtime A's life
	killed bool             // the fault fired (false: the run outlived it)
}

// Check runs one case over fresh stores s and returns every violated
// property, joined (nil when the case holds). Runtime A drives the flow
// over a FaultStore that kills after c.KillAfter events, answering the
// gate itself if it gets there, until it completes or dies; it is then
// closed, which waits for its drives to stop. Runtime B, a fresh process
// over the same stores, recovers the execution, answers the gate if it is
// still parked there and waits for completion. Then:
//
//   - the execution completed;
//   - the log's sequences are 0..len-1 and its first events are exactly
//     the crashed run's durable log;
//   - a step (or the decision) whose outcome was durable before the crash
//     was not invoked in B (so in all, exactly once);
//   - every step has exactly one outcome in the log and a completed frame,
//     and no effect ran more than once per process;
//   - the folded state equals ref's after Normalize, and the state B's
//     WaitForCompletion folded (snapshot plus tail) equals the log's fold
//     byte for byte.
func Check(ctx context.Context, s Stores, ref Reference, c Case) error {
	if c.KillAfter < 1 {
		return fmt.Errorf("crashtest: %s: KillAfter must be >= 1", c.Name())
	}
	rep := &report{name: c.Name()}
	logs := &logBuffer{}
	counters := NewCounters()
	a, err := crash(ctx, s, c, counters, logs)
	if err != nil {
		rep.add(PropRun, "crashed run: %v", err)
		return rep.err(logs)
	}
	if !a.killed && c.KillAfter < ref.Events {
		rep.add(PropRun, "the run ended after %d events without reaching the kill point", len(a.log))
	}
	res, err := recoverRun(ctx, s, c, counters, logs, a)
	if err != nil {
		rep.add(PropCompletes, "recovery: %v", err)
		return rep.err(logs)
	}
	log, err := store.Read(ctx, s.Events, ExecutionID)
	if err != nil {
		rep.add(PropRun, "reading the final log: %v", err)
		return rep.err(logs)
	}
	checkFinal(rep, ref, a, counters.Snapshot(), log, res)
	return rep.err(logs)
}

// crash is the life of runtime A: start, answer the gate once when the
// durable log shows it parked, and stop at completion or at the kill. The
// log is followed through a subscription on the inner store, so nothing
// waits on the wall clock.
func crash(ctx context.Context, s Stores, c Case, counters *Counters, logs *logBuffer) (crashed, error) {
	fault := NewFaultStore(s.Events)
	fault.KillAfter(c.KillAfter)
	rt, err := newRuntime(Stores{Events: fault, Snapshots: s.Snapshots}, c.Durability, counters, logs)
	if err != nil {
		return crashed{}, err
	}
	driveErr := driveUntilCrash(ctx, rt, fault, s.Events)
	if err := rt.Close(); err != nil && driveErr == nil {
		driveErr = err
	}
	if driveErr != nil {
		return crashed{}, driveErr
	}
	log, err := store.Read(ctx, s.Events, ExecutionID)
	if err != nil {
		return crashed{}, err
	}
	return crashed{log: log, counts: counters.Snapshot(), killed: fault.Dead()}, nil
}

// driveUntilCrash starts the flow on rt and follows the inner store's log
// until the execution ends or fault dies; the first park on Gate is
// answered through rt, so the gate's resume is an append point too.
func driveUntilCrash(ctx context.Context, rt *loom.Runtime, fault *FaultStore, inner store.EventStore) error {
	if _, err := rt.Start(ctx, FlowID, FlowInput, loom.WithExecutionID(ExecutionID)); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	sub, err := subscribe(ctx, inner)
	if err != nil {
		return err
	}
	defer sub.Close()
	f := fold.NewFolder(fold.Initial())
	answered := false
	for {
		select {
		case <-fault.Killed():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("the crashed run neither ended nor died: %w", ctx.Err())
		case e, ok := <-sub.Events():
			if !ok {
				return fmt.Errorf("%w: %v", errWaitEnded, sub.Err())
			}
			f.Apply(e)
			st := f.Peek()
			switch {
			case st.Status.Terminal():
				return nil
			case st.Status == fold.StatusSuspended && !answered:
				if on := parkedOn(*st); on != Gate {
					return fmt.Errorf("parked on %q, want %q", on, Gate)
				}
				answered = true
				err := rt.Resume(ctx, ExecutionID, loom.ResumeEvent{EventType: Gate, Payload: ApprovalPayload})
				if err != nil && !errors.Is(err, ErrKilled) {
					return fmt.Errorf("answering the gate: %w", err)
				}
			}
		}
	}
}

// errWaitEnded is returned when a log subscription ends before the crashed
// run completed or died.
var errWaitEnded = errors.New("crashtest: subscription ended")

func subscribe(ctx context.Context, s store.EventStore) (*store.Subscription, error) {
	sub, ok := s.(store.Subscriber)
	if !ok {
		return nil, errors.New("crashtest: the event store must implement store.Subscriber")
	}
	return sub.Subscribe(ctx, ExecutionID, 0)
}

// recoverRun is the life of runtime B: Recover, answer the gate if the
// execution is (still or again) parked on it, wait for completion.
func recoverRun(ctx context.Context, s Stores, c Case, counters *Counters, logs *logBuffer, a crashed) (loom.Result, error) {
	if c.Recovery != nil {
		s = c.Recovery(s)
	}
	rt, err := newRuntime(s, c.Durability, counters, logs)
	if err != nil {
		return loom.Result{}, err
	}
	defer rt.Close()
	n, err := rt.Recover(ctx)
	if err != nil {
		return loom.Result{}, fmt.Errorf("Recover: %w", err)
	}
	if want := fold.Fold(a.log).Status == fold.StatusRunning; (n == 1) != want || n > 1 {
		return loom.Result{}, fmt.Errorf("Recover re-drove %d executions; the crashed log is %s", n, fold.Fold(a.log).Status)
	}
	st, err := rt.WaitForSuspend(ctx, ExecutionID)
	var ended *loom.ExecutionTerminatedError
	switch {
	case errors.As(err, &ended):
	case err != nil:
		return loom.Result{}, fmt.Errorf("waiting for the gate or the end: %w", err)
	default:
		if on := parkedOn(st); on != Gate {
			return loom.Result{}, fmt.Errorf("recovered execution parked on %q, want %q", on, Gate)
		}
		if err := answerGate(ctx, rt); err != nil {
			return loom.Result{}, fmt.Errorf("answering the gate: %w", err)
		}
	}
	res, err := rt.WaitForCompletion(ctx, ExecutionID)
	if err != nil {
		return res, err
	}
	if res.Status != fold.StatusCompleted {
		return res, fmt.Errorf("ended %s", res.Status)
	}
	return res, rt.Close()
}

// answerGate resumes the gate. A recovery whose store hides events (the
// kit's own failure tests) may report a park before the live run reaches
// it: a not-suspended refusal is retried once the run has settled.
func answerGate(ctx context.Context, rt *loom.Runtime) error {
	for attempt := 0; ; attempt++ {
		err := rt.Resume(ctx, ExecutionID, loom.ResumeEvent{EventType: Gate, Payload: ApprovalPayload})
		var rr *loom.ResumeRefusedError
		if !errors.As(err, &rr) || rr.Reason != loom.RefusedNotSuspended || attempt >= 100 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}
