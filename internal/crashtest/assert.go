package crashtest

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// checkFinal checks a recovered case: the final log, the world (effect
// counts in total and of runtime A alone, the charged provider, the sink),
// the in-doubt parks and the result of B's WaitForCompletion against the
// crashed run a and the reference.
func checkFinal(rep *report, ref Reference, a crashed, w *World, log []event.Envelope, b recovered) {
	spec := ref.Variant.spec()
	checkSequences(rep, log)
	checkHistory(rep, a.log, log)
	checkOutcomesOnce(rep, spec, log)
	checkNoRerun(rep, spec, a, w.Counters.Snapshot())
	checkInDoubt(rep, spec, a, b.parks, log)

	final := fold.Fold(log)
	if final.Status != fold.StatusCompleted {
		rep.add(PropCompletes, "the log folds to %s", final.Status)
	}
	for _, id := range spec.steps {
		if fr, ok := final.Frames[id]; !ok || fr.Status != fold.FrameCompleted {
			rep.add(PropExactlyOnce, "step %s has no completed frame (%+v)", id, fr)
		}
	}
	checkEffects(rep, spec, w, final)
	norm, err := Normalize(final)
	if err != nil {
		rep.add(PropState, "%v", err)
		return
	}
	normalizeInDoubt(rep, norm, b.parks)
	if d := Diff(ref.State, norm); d != "" {
		rep.add(PropState, "final state differs from the uncrashed run's:%s", d)
	}
	// B's wait folded its snapshot plus the tail: it must be the log's fold
	// byte for byte (fold(snapshot@k, tail) == fold(all)).
	got, gerr := fold.Encode(b.res.State)
	want, werr := fold.Encode(final)
	if gerr != nil || werr != nil || !bytes.Equal(got, want) {
		rep.add(PropState, "the state WaitForCompletion returned differs from the log's fold:\n  wait %s\n  log  %s", got, want)
	}
}

// checkEffects checks the world against the final state. A non-idempotent
// step acted exactly once in all — never twice silently, whatever the
// crash — under the key of the attempt the log completed. A sink step
// delivered under exactly one distinct key, that attempt's: however often
// a crash re-ran it, the receiver performed it once.
func checkEffects(rep *report, spec flowSpec, w *World, final fold.State) {
	counts := w.Counters.Snapshot()
	for _, id := range spec.nonIdempotent {
		want := []string{effect.IdempotencyKey(ExecutionID, id, final.Frames[id].Attempt)}
		keys, n := w.Charged.Keys(id), w.Charged.Deliveries(id)
		if counts[id] != 1 || n != 1 || !slices.Equal(keys, want) {
			rep.add(PropEffectOnce, "non-idempotent %s acted %d times under keys %v, want once under %v", id, n, keys, want)
		}
	}
	for _, id := range spec.sinks {
		want := []string{effect.IdempotencyKey(ExecutionID, id, final.Frames[id].Attempt)}
		if keys := w.Delivered.Keys(id); !slices.Equal(keys, want) {
			rep.add(PropSinkOnce, "the sink holds %d distinct deliveries of %s (keys %v, %d deliveries), want one under %v",
				len(keys), id, keys, w.Delivered.Deliveries(id), want)
		}
	}
}

// checkHistory reports a final log whose first events are not exactly the
// crashed run's durable log: recovery appends, it never rewrites.
func checkHistory(rep *report, durable, log []event.Envelope) {
	if len(log) < len(durable) {
		rep.add(PropHistory, "the final log (%d events) is shorter than the crashed run's durable log (%d)", len(log), len(durable))
		return
	}
	for i, d := range durable {
		e := log[i]
		if e.ID != d.ID || e.Type != d.Type || e.Sequence != d.Sequence || !bytes.Equal(e.Payload, d.Payload) {
			rep.add(PropHistory, "event %d changed after the crash: %s %s became %s %s", i, d.Type, d.ID, e.Type, e.ID)
			return
		}
	}
}

// checkNoRerun is the heart of the matrix. A step or decision whose outcome
// was durable before the crash must not have been invoked by runtime B, so
// it ran exactly once in all. One that was not durable may have run in A
// (its outcome lost with the process, allowed in WriteBehind or when the
// crash hit between the effect and its record) and again in B, but never
// twice in one process, and at least once.
func checkNoRerun(rep *report, spec flowSpec, a crashed, counts map[string]int64) {
	durable := map[string]bool{}
	for _, e := range a.log {
		switch e.Type {
		case event.StepCompleted:
			durable[stepIDOf(e)] = true
		case event.DecisionRecorded:
			durable[decisionIDOf(e)] = true
		}
	}
	for _, id := range spec.counted() {
		total, inA := counts[id], a.counts[id]
		inB := total - inA
		switch {
		case durable[id] && inB != 0:
			rep.add(PropNoRerun, "%s completed durably before the crash but ran again after it (%d in A, %d in B)", id, inA, inB)
		case durable[id] && total != 1:
			rep.add(PropNoRerun, "%s completed durably before the crash but ran %d times in all", id, total)
		case total < 1 || inA > 1 || inB > 1:
			rep.add(PropExactlyOnce, "%s ran %d times in A and %d in B: want at least once, at most once per process", id, inA, inB)
		}
	}
}

// stepIDOf returns the stepId of a step event's payload.
func stepIDOf(e event.Envelope) string {
	var p struct {
		StepID string `json:"stepId"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.StepID
}

// decisionIDOf returns the decisionId of a DECISION_RECORDED payload.
func decisionIDOf(e event.Envelope) string {
	var p struct {
		DecisionID string `json:"decisionId"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.DecisionID
}
