package crashtest

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Reference is an uncrashed run of a variant's flow: the yardstick of
// every case of its variant and durability mode.
type Reference struct {
	Variant    Variant
	Durability loom.Durability
	// Events is the length of the uncrashed log (N_total): the append
	// points are 1..Events-1, and KillAfter(Events) loses nothing.
	Events int
	// Log is the uncrashed log, for finding append points in it. The
	// payment flow is sequential, so every run of it appends its events in
	// this order; the order flow's Parallel block may interleave its
	// branches differently.
	Log []event.Envelope
	// State is the normalised final state.
	State map[string]any
}

// RunReference runs v's flow without a fault over s (start, answer the
// gate, wait for completion) and checks the run itself: completed, every
// effect ran exactly once (a sink step under one key), no in-doubt park,
// sequences contiguous.
func RunReference(ctx context.Context, s Stores, v Variant, d loom.Durability) (Reference, error) {
	logs := &logBuffer{}
	rep := &report{name: "reference/" + v.prefix() + DurabilityName(d)}
	spec := v.spec()
	w := newWorld(v)
	rt, err := newRuntime(s, spec, d, w, logs)
	if err != nil {
		return Reference{}, err
	}
	defer rt.Close()
	if _, err := rt.Start(ctx, spec.flowID, FlowInput, loom.WithExecutionID(ExecutionID)); err != nil {
		return Reference{}, fmt.Errorf("crashtest: reference start: %w", err)
	}
	st, err := rt.WaitForSuspend(ctx, ExecutionID)
	if err != nil {
		return Reference{}, fmt.Errorf("crashtest: reference never parked: %w", err)
	}
	if on := parkedOn(st); on != Gate {
		return Reference{}, fmt.Errorf("crashtest: reference parked on %q, want %q", on, Gate)
	}
	if err := rt.Resume(ctx, ExecutionID, loom.ResumeEvent{EventType: Gate, Payload: ApprovalPayload}); err != nil {
		return Reference{}, fmt.Errorf("crashtest: reference resume: %w", err)
	}
	res, err := rt.WaitForCompletion(ctx, ExecutionID)
	if err != nil {
		return Reference{}, fmt.Errorf("crashtest: reference did not complete: %w", err)
	}
	if err := rt.Close(); err != nil {
		return Reference{}, err
	}
	log, err := store.Read(ctx, s.Events, ExecutionID)
	if err != nil {
		return Reference{}, err
	}
	checkSequences(rep, log)
	checkOutcomesOnce(rep, spec, log)
	checkInDoubt(rep, spec, crashed{log: log}, nil, log)
	for id, n := range w.Counters.Snapshot() { //loom:order-independent each id is checked alone
		if n != 1 {
			rep.add(PropExactlyOnce, "%s ran %d times in an uncrashed run", id, n)
		}
	}
	final := fold.Fold(log)
	if final.Status != fold.StatusCompleted || res.Status != fold.StatusCompleted {
		rep.add(PropCompletes, "uncrashed run ended %s (log) / %s (wait)", final.Status, res.Status)
	}
	checkEffects(rep, spec, w, final)
	norm, err := Normalize(final)
	if err != nil {
		return Reference{}, err
	}
	normalizeInDoubt(rep, norm, nil)
	if err := rep.err(logs); err != nil {
		return Reference{}, err
	}
	return Reference{Variant: v, Durability: d, Events: len(log), Log: log, State: norm}, nil
}

// parkedOn returns the gate a state is parked on, "" when it is not parked.
func parkedOn(s fold.State) string {
	if s.Status != fold.StatusSuspended || s.Variables.SuspendedOn == nil {
		return ""
	}
	return s.Variables.SuspendedOn.On
}

// checkSequences reports a log whose sequences are not exactly 0..len-1 or
// that holds an event of another execution.
func checkSequences(rep *report, log []event.Envelope) {
	for i, e := range log {
		if e.Sequence != int64(i) {
			rep.add(PropSequence, "event %d (%s) has sequence %d: a gap or a duplicate", i, e.Type, e.Sequence)
			return
		}
		if e.ExecutionID != ExecutionID {
			rep.add(PropSequence, "event %d belongs to execution %q", i, e.ExecutionID)
			return
		}
	}
}

// checkOutcomesOnce reports a step or the decision whose outcome the log
// records other than exactly once, and an execution started or ended other
// than once.
func checkOutcomesOnce(rep *report, spec flowSpec, log []event.Envelope) {
	outcomes := map[string]int{}
	lifecycle := map[string]int{}
	for _, e := range log {
		switch e.Type {
		case event.StepCompleted, event.StepFailed:
			outcomes[stepIDOf(e)]++
		case event.DecisionRecorded:
			outcomes["decision:"+decisionIDOf(e)]++
		case event.ExecutionStarted, event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
			lifecycle[e.Type]++
		}
	}
	ids := append([]string(nil), spec.steps...)
	for _, d := range spec.decisions {
		ids = append(ids, "decision:"+d)
	}
	for _, id := range ids {
		if outcomes[id] != 1 {
			rep.add(PropExactlyOnce, "the log records %d outcomes of %s, want 1", outcomes[id], id)
		}
	}
	if lifecycle[event.ExecutionStarted] != 1 || lifecycle[event.ExecutionCompleted] != 1 || len(lifecycle) != 2 {
		rep.add(PropExactlyOnce, "lifecycle events %v, want one start and one completion", lifecycle)
	}
}
