package dst

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/fold"
)

// maxDrainRounds bounds the drain: each round answers every park once.
const maxDrainRounds = 24

// drain is InvResumable: with no more faults, it answers every parked
// execution, round after round, the way its park asks to be answered, and
// checks that each one moves. Its answers come from a stream of the seed
// of their own, so a replay drains the same way.
func (r *run) drain() {
	rnd := streamOf(r.seed, "drain")
	failed := map[string]bool{} // one violation per execution is enough
	for range maxDrainRounds {
		w, err := r.look()
		if err != nil {
			r.violate(InvSettles, "", "reading the durable log: "+err.Error())
			return
		}
		acted := false
		for _, id := range w.ids() {
			// Read again: an earlier answer this round may have moved it
			// (timers fire in wake order, whoever they belong to).
			w, err := r.look()
			if err != nil {
				r.violate(InvSettles, "", "reading the durable log: "+err.Error())
				return
			}
			x, _ := w.get(id)
			if failed[id] {
				continue
			}
			act, what := r.drainAction(w, x, rnd)
			if act == nil {
				continue
			}
			acted = true
			err = act()
			r.settle()
			switch after := r.lenOf(x.ID); {
			case err != nil:
				failed[id] = true
				r.violate(InvResumable, x.ID, fmt.Sprintf("%s: refused: %v", what, err))
			case after <= x.Len:
				failed[id] = true
				r.violate(InvResumable, x.ID, fmt.Sprintf("%s: the execution did not move (log still ends at #%d)", what, after-1))
			}
		}
		if !acted {
			return
		}
	}
}

// drainAction is how x's park is answered, or nil when x is not parked or
// nothing outside the kernel answers its park (a parent awaiting a child
// that has not ended).
func (r *run) drainAction(w world, x execView, rnd *rand.Rand) (func() error, string) {
	gate := x.parkedOn()
	if gate == "" {
		return nil, ""
	}
	ctx, cancel := r.callCtx()
	answer := func(g string) (func() error, string) {
		payload := raw(r.answer(w, x.ID, g, rnd))
		return func() error {
			defer cancel()
			return r.call("Resume", x.ID, func() error {
				return r.rt.Resume(ctx, x.ID, loom.ResumeEvent{EventType: g, Payload: payload})
			})
		}, fmt.Sprintf("answering gate %q with %s", g, payload)
	}
	switch {
	case !strings.HasPrefix(gate, reservedPrefix):
		return answer(gate)
	case gate == gateSleep:
		cancel()
		return r.fireOwn(x), "firing its sleep's timer"
	case gate == gateSelect:
		ws := x.waits()
		for _, kind := range []string{"message", "gate", "timer"} {
			for _, wt := range ws {
				switch {
				case wt.Kind != kind:
				case kind == "message":
					payload := raw(r.message(w, x.ID, wt.Topic, rnd))
					return func() error {
						defer cancel()
						return r.call("Send", x.ID, func() error { return r.rt.Send(ctx, x.ID, wt.Topic, payload) })
					}, fmt.Sprintf("sending %s to its select's topic %q", payload, wt.Topic)
				case kind == "gate":
					return answer(wt.On)
				default:
					cancel()
					return r.fireOwn(x), "firing its select's timer"
				}
			}
		}
	case gate == fold.GateInDoubt && x.State.Variables.SuspendedOn.Attempt != nil:
		v := loom.Verdict{StepID: x.State.Variables.SuspendedOn.StepID, Attempt: *x.State.Variables.SuspendedOn.Attempt}
		v.Done, v.Output = r.ledger.outcome(effect.IdempotencyKey(x.ID, v.StepID, v.Attempt))
		return func() error {
			defer cancel()
			return r.call("ResolveInDoubt", x.ID, func() error { return r.rt.ResolveInDoubt(ctx, x.ID, v) })
		}, fmt.Sprintf("resolving its in-doubt step %q (done: %t)", v.StepID, v.Done)
	case gate == fold.GateDiverged:
		r.violate(InvNoDivergence, x.ID, fmt.Sprintf("parked on %s at #%d", gate, x.State.Sequence))
	case gate == gateChild:
		child, ok := w.get(x.State.Variables.SuspendedOn.CorrelationKey)
		if ok && child.State.Status.Terminal() && child.State.Status != fold.StatusContinued {
			r.violate(InvResumable, x.ID, fmt.Sprintf("parked on child %s, which ended %s, and nobody answered it",
				child.ID, child.State.Status))
		}
	}
	cancel()
	return nil, ""
}

// fireOwn fires the timers due up to x's own timer, one at a time, and
// fails when x has no timer stored (nothing could ever wake its park).
func (r *run) fireOwn(x execView) func() error {
	return func() error {
		ctx, cancel := r.callCtx()
		all, err := r.timers.Due(ctx, math.MaxInt64, 10_000)
		cancel()
		if err != nil {
			return err
		}
		wake := int64(-1)
		for _, t := range all {
			if t.ExecutionID == x.ID {
				wake = t.WakeAt
				break
			}
		}
		if wake < 0 {
			return fmt.Errorf("its park waits for a timer, and none is stored for it")
		}
		for range maxTimersPerAdvance {
			if r.lenOf(x.ID) > x.Len {
				return nil
			}
			if _, ok := r.fireNext(wake); !ok {
				return nil
			}
		}
		return nil
	}
}
