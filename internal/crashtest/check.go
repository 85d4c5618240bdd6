package crashtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Case is one cell of the matrix.
type Case struct {
	// Variant is the flow the case runs (Order, the zero value, or Payment).
	Variant    Variant
	Durability loom.Durability
	// KillAfter is the number of events durably appended before the
	// process dies (>= 1: EXECUTION_STARTED always survives). A value at or
	// past the run's length loses nothing. It is 0 exactly when
	// KillInEffect is set.
	KillAfter int
	// KillInEffect, when set, names a non-idempotent step of the Payment
	// flow whose effect kills the process on entry, before it acts: its
	// STEP_STARTED is durable, the world untouched, the outcome never
	// written. No append point produces that crash, since the fault store
	// only dies on a write.
	KillInEffect string
	// Recovery, when set, decorates the stores the recovering runtime sees.
	// The matrix never sets it; the kit's self-test uses it to break
	// recovery on purpose and show that Check notices.
	Recovery func(Stores) Stores
}

// Name is the case's name in reports:
// "[<variant>/]<durability>/<point>" (see Variant).
func (c Case) Name() string {
	return c.Variant.prefix() + DurabilityName(c.Durability) + "/" + c.point()
}

// point names the crash point: "kill-after-<n>" or "kill-in-<step>".
func (c Case) point() string {
	if c.KillInEffect != "" {
		return "kill-in-" + c.KillInEffect
	}
	return fmt.Sprintf("kill-after-%02d", c.KillAfter)
}

// validate refuses a case that names no crash point, or two.
func (c Case) validate() error {
	switch {
	case c.KillInEffect != "" && c.KillAfter != 0:
		return fmt.Errorf("crashtest: %s: KillAfter and KillInEffect are exclusive", c.Name())
	case c.KillInEffect != "" && !slices.Contains(c.Variant.spec().nonIdempotent, c.KillInEffect):
		return fmt.Errorf("crashtest: %s: %q is no non-idempotent step of the %s flow", c.Name(), c.KillInEffect, c.Variant)
	case c.KillInEffect == "" && c.KillAfter < 1:
		return fmt.Errorf("crashtest: %s: KillAfter must be >= 1", c.Name())
	}
	return nil
}

// crashed is what the crashed process left behind.
type crashed struct {
	log    []event.Envelope // the durable log once runtime A has closed
	counts map[string]int64 // effects that acted during runtime A's life
	killed bool             // the fault fired (false: the run outlived it)
}

// Outcome is what a case's recovery met on its way to completion, for
// reports and for the kit's own tests.
type Outcome struct {
	// InDoubt lists the in-doubt parks runtime B met, in order, with the
	// verdict the kit gave each.
	InDoubt []InDoubtPark
}

// Check runs one case over fresh stores s and returns every violated
// property, joined (nil when the case holds). Runtime A drives the flow
// over a FaultStore that kills after c.KillAfter events (or inside
// c.KillInEffect's effect), answering the gate itself if it gets there,
// until it completes or dies; it is then closed, which waits for its
// drives to stop. Runtime B, a fresh process over the same stores,
// recovers the execution, answers an in-doubt park with the verdict the
// world supports (see InDoubtPark), answers the gate if it is still parked
// there and waits for completion. Then:
//
//   - the execution completed;
//   - the log's sequences are 0..len-1 and its first events are exactly
//     the crashed run's durable log;
//   - a step (or the decision) whose outcome was durable before the crash
//     was not invoked in B (so in all, exactly once);
//   - every step has exactly one outcome in the log and a completed frame,
//     and no effect ran more than once per process;
//   - B parked in doubt exactly when the crashed log holds a
//     non-idempotent step's STEP_STARTED without its outcome — with
//     EFFECT_INDOUBT, then EXECUTION_SUSPENDED on the reserved gate naming
//     the step and attempt — and did not run that step while parked;
//   - every non-idempotent effect acted exactly once in all, under the key
//     of the attempt the log completed; every sink step's deliveries carry
//     exactly one distinct key, that attempt's;
//   - the folded state equals ref's after Normalize (and, after an
//     in-doubt park, after removing exactly what the park and its verdict
//     add), and the state B's WaitForCompletion folded (snapshot plus
//     tail) equals the log's fold byte for byte.
func Check(ctx context.Context, s Stores, ref Reference, c Case) error {
	_, err := CheckOutcome(ctx, s, ref, c)
	return err
}

// CheckOutcome is Check that also returns what the recovery met.
func CheckOutcome(ctx context.Context, s Stores, ref Reference, c Case) (Outcome, error) {
	if err := c.validate(); err != nil {
		return Outcome{}, err
	}
	if ref.Variant != c.Variant {
		return Outcome{}, fmt.Errorf("crashtest: %s: the reference is of the %s flow", c.Name(), ref.Variant)
	}
	rep := &report{name: c.Name()}
	logs := &logBuffer{}
	w := newWorld(c.Variant)
	a, err := crash(ctx, s, c, w, logs)
	if err != nil {
		rep.add(PropRun, "crashed run: %v", err)
		return Outcome{}, rep.err(logs)
	}
	switch {
	case c.KillInEffect != "" && !a.killed:
		rep.add(PropRun, "the run ended after %d events without entering %s's effect", len(a.log), c.KillInEffect)
	case c.KillInEffect == "" && !a.killed && c.KillAfter < ref.Events:
		rep.add(PropRun, "the run ended after %d events without reaching the kill point", len(a.log))
	}
	b, err := recoverRun(ctx, s, c, w, logs, a)
	out := Outcome{InDoubt: b.parks}
	if err != nil {
		rep.add(PropCompletes, "recovery: %v", err)
		return out, rep.err(logs)
	}
	log, err := store.Read(ctx, s.Events, ExecutionID)
	if err != nil {
		rep.add(PropRun, "reading the final log: %v", err)
		return out, rep.err(logs)
	}
	checkFinal(rep, ref, a, w, log, b)
	return out, rep.err(logs)
}

// crash is the life of runtime A: start, answer the gate once when the
// durable log shows it parked, and stop at completion or at the kill. The
// log is followed through a subscription on the inner store, so nothing
// waits on the wall clock.
func crash(ctx context.Context, s Stores, c Case, w *World, logs *logBuffer) (crashed, error) {
	fault := NewFaultStore(s.Events)
	if c.KillAfter > 0 {
		fault.KillAfter(c.KillAfter)
	}
	w.armKill(c.KillInEffect, fault.Kill)
	defer w.armKill("", nil) // runtime B's effects never die
	spec := c.Variant.spec()
	rt, err := newRuntime(Stores{Events: fault, Snapshots: s.Snapshots}, spec, c.Durability, w, logs)
	if err != nil {
		return crashed{}, err
	}
	driveErr := driveUntilCrash(ctx, rt, spec.flowID, fault, s.Events)
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
	return crashed{log: log, counts: w.Counters.Snapshot(), killed: fault.Dead()}, nil
}

// driveUntilCrash starts the flow on rt and follows the inner store's log
// until the execution ends or fault dies; the first park on Gate is
// answered through rt, so the gate's resume is an append point too.
func driveUntilCrash(ctx context.Context, rt *loom.Runtime, flowID string, fault *FaultStore, inner store.EventStore) error {
	if _, err := rt.Start(ctx, flowID, FlowInput, loom.WithExecutionID(ExecutionID)); err != nil {
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

// recovered is what runtime B did.
type recovered struct {
	res   loom.Result   // WaitForCompletion's result
	parks []InDoubtPark // the in-doubt parks it met, answered
}

// recoverRun is the life of runtime B: Recover, answer an in-doubt park
// with the verdict the world supports, answer the gate if the execution is
// (still or again) parked on it, wait for completion.
func recoverRun(ctx context.Context, s Stores, c Case, w *World, logs *logBuffer, a crashed) (recovered, error) {
	var b recovered
	if c.Recovery != nil {
		s = c.Recovery(s)
	}
	rt, err := newRuntime(s, c.Variant.spec(), c.Durability, w, logs)
	if err != nil {
		return b, err
	}
	defer rt.Close()
	n, err := rt.Recover(ctx)
	if err != nil {
		return b, fmt.Errorf("runtime B's Recover: %w", err)
	}
	if want := fold.Fold(a.log).Status == fold.StatusRunning; (n == 1) != want || n > 1 {
		return b, fmt.Errorf("runtime B's Recover re-drove %d executions; the crashed log is %s", n, fold.Fold(a.log).Status)
	}
	st, err := rt.WaitForSuspend(ctx, ExecutionID)
	if err == nil && parkedOn(st) == fold.GateInDoubt {
		p, rerr := resolveInDoubt(ctx, rt, st, w)
		b.parks = append(b.parks, p)
		if rerr != nil {
			return b, fmt.Errorf("answering the in-doubt park of %s#%d: %w", p.StepID, p.Attempt, rerr)
		}
		st, err = rt.WaitForSuspend(ctx, ExecutionID)
	}
	var ended *loom.ExecutionTerminatedError
	switch {
	case errors.As(err, &ended):
	case err != nil:
		return b, fmt.Errorf("waiting for the gate or the end: %w", err)
	default:
		if on := parkedOn(st); on != Gate {
			return b, fmt.Errorf("recovered execution parked on %q, want %q", on, Gate)
		}
		if err := answerGate(ctx, rt); err != nil {
			return b, fmt.Errorf("answering the gate: %w", err)
		}
	}
	b.res, err = rt.WaitForCompletion(ctx, ExecutionID)
	if err != nil {
		return b, err
	}
	if b.res.Status != fold.StatusCompleted {
		return b, fmt.Errorf("ended %s", b.res.Status)
	}
	return b, rt.Close()
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
