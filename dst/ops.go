package dst

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/fold"
)

// maxTimersPerAdvance bounds the timers one OpAdvance fires: a flow that
// arms timers forever ends the advance instead of spinning it.
const maxTimersPerAdvance = 256

// explore draws and applies the run's operations.
func (r *run) explore() {
	n := r.sim.ops()/2 + r.rnd.IntN(r.sim.ops()/2+1)
	for range n {
		w, err := r.look()
		if err != nil {
			r.violate(InvSettles, "", "reading the durable log: "+err.Error())
			return
		}
		r.apply(r.nextOp(w))
	}
}

// apply runs one operation, then brings the run to rest.
func (r *run) apply(op Op) {
	i := len(r.ops)
	r.plan.setOp(i)
	r.ops = append(r.ops, op)
	r.note("%d %s", i, op)
	line := len(r.trace) - 1
	out := r.do(op)
	r.trace[line] += ": " + out
	r.settle()
}

// outcome renders an operation's error (refusals are outcomes, not
// violations: the invariants judge what they left in the log).
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// do performs op against the running process.
func (r *run) do(op Op) string {
	ctx, cancel := r.callCtx()
	defer cancel()
	switch op.Kind {
	case OpStart:
		return outcome(r.call("Start", op.Exec, func() error {
			_, err := r.rt.Start(ctx, op.Flow, op.Payload, loom.WithExecutionID(op.Exec))
			return err
		}))
	case OpAnswer:
		return outcome(r.call("Resume", op.Exec, func() error {
			return r.rt.Resume(ctx, op.Exec, loom.ResumeEvent{EventType: op.Name, Payload: op.Payload})
		}))
	case OpSend:
		return outcome(r.call("Send", op.Exec, func() error { return r.rt.Send(ctx, op.Exec, op.Name, op.Payload) }))
	case OpAdvance:
		return r.advance(op.Millis)
	case OpCrash:
		r.proc.kill()
		r.restart()
		return fmt.Sprintf("killed process %d", r.procs-1)
	case OpRecover:
		var n int
		err := r.call("Recover", "", func() (err error) {
			n, err = r.rt.Recover(ctx)
			return err
		})
		if err != nil {
			return outcome(err)
		}
		return fmt.Sprintf("recovered %d", n)
	case OpCancel:
		return outcome(r.call("Cancel", op.Exec, func() error { return r.rt.Cancel(ctx, op.Exec, "dst") }))
	case OpResolve:
		return r.resolve(op.Exec)
	}
	return "skipped: unknown operation"
}

// resolve answers id's in-doubt park from the effect ledger: done, with
// the output the effect produced, when it acted; run again when it did not.
func (r *run) resolve(id string) string {
	w, err := r.look()
	if err != nil {
		return outcome(err)
	}
	x, ok := w.get(id)
	if !ok || x.parkedOn() != fold.GateInDoubt || x.State.Variables.SuspendedOn.Attempt == nil {
		return "skipped: not parked in doubt"
	}
	v := loom.Verdict{StepID: x.State.Variables.SuspendedOn.StepID, Attempt: *x.State.Variables.SuspendedOn.Attempt}
	v.Done, v.Output = r.ledger.outcome(effect.IdempotencyKey(id, v.StepID, v.Attempt))
	ctx, cancel := r.callCtx()
	defer cancel()
	if err := r.call("ResolveInDoubt", id, func() error { return r.rt.ResolveInDoubt(ctx, id, v) }); err != nil {
		return outcome(err)
	}
	return fmt.Sprintf("ok (done: %t)", v.Done)
}

// advance moves the clock ms forward, firing every timer due on the way
// one at a time, each at its own instant with the run at rest before the
// next; it leaves the clock at now+ms.
func (r *run) advance(ms int64) string {
	target := r.clock.Now().Add(time.Duration(ms) * time.Millisecond)
	fired := 0
	for fired < maxTimersPerAdvance {
		n, ok := r.fireNext(target.UnixMilli())
		if !ok {
			break
		}
		fired += n
	}
	r.clock.advanceTo(target)
	return fmt.Sprintf("fired %d", fired)
}

// fireNext moves the clock to the earliest timer due by until and fires
// one due timer through Runtime.FireDueTimers, then settles. It reports
// false when no timer is due by until, or the runtime fired none (its
// execution is busy or no driver holds it).
func (r *run) fireNext(until int64) (int, bool) {
	ctx, cancel := r.callCtx()
	defer cancel()
	due, err := r.timers.Due(ctx, until, 1)
	if err != nil || len(due) == 0 {
		return 0, false
	}
	r.clock.advanceTo(time.UnixMilli(due[0].WakeAt).UTC())
	r.proc.setBudget(1)
	var n int
	err = r.call("FireDueTimers", "", func() (err error) {
		n, err = r.rt.FireDueTimers(ctx)
		return err
	})
	r.proc.setBudget(-1)
	if err != nil {
		r.note("  fire: %v", err)
	}
	r.settle()
	return n, n > 0
}

// choice is one operation the generator may draw, with its weight.
type choice struct {
	weight int
	draw   func() Op
}

// nextOp draws the next operation from what the world looks like now.
func (r *run) nextOp(w world) Op {
	var cs []choice
	add := func(weight int, draw func() Op) { cs = append(cs, choice{weight, draw}) }
	if roots := r.rootFlows(); r.started < r.sim.executions() && len(roots) > 0 {
		weight := 3
		if r.started == 0 {
			weight = 1 << 20 // a run starts with a start
		}
		add(weight, func() Op {
			f := roots[r.rnd.IntN(len(roots))]
			r.started++
			return Op{Kind: OpStart, Exec: fmt.Sprintf("x%d", r.started), Flow: f.Flow.ID, Payload: raw(f.Input(r.rnd))}
		})
	}
	on := r.targetsOf(w)
	gates, topics, doubts, live := on.gates, on.topics, on.doubts, on.live
	pick := func(ts []target) target { return ts[r.rnd.IntN(len(ts))] }
	if len(gates) > 0 {
		add(5, func() Op {
			t := pick(gates)
			return Op{Kind: OpAnswer, Exec: t.id, Name: t.name, Payload: raw(r.answer(w, t.id, t.name, r.rnd))}
		})
	}
	if len(topics) > 0 {
		add(3, func() Op {
			t := pick(topics)
			return Op{Kind: OpSend, Exec: t.id, Name: t.name, Payload: raw(r.message(w, t.id, t.name, r.rnd))}
		})
	}
	if len(doubts) > 0 {
		add(4, func() Op { return Op{Kind: OpResolve, Exec: pick(doubts).id} })
	}
	if next, ok := r.nextTimer(); ok {
		add(4, func() Op {
			ms := max(next-r.clock.Now().UnixMilli(), 0)
			if r.rnd.IntN(3) == 0 {
				ms += r.rnd.Int64N(int64(time.Hour / time.Millisecond))
			}
			return Op{Kind: OpAdvance, Millis: ms}
		})
	}
	add(1, func() Op {
		return Op{Kind: OpAdvance, Millis: (1 + r.rnd.Int64N(120)) * int64(time.Minute/time.Millisecond)}
	})
	if on.undriven {
		add(4, func() Op { return Op{Kind: OpRecover} })
	} else if len(w.execs) > 0 {
		add(1, func() Op { return Op{Kind: OpRecover} })
	}
	if len(w.execs) > 0 {
		add(2, func() Op { return Op{Kind: OpCrash} })
	}
	if len(live) > 0 {
		add(1, func() Op { return Op{Kind: OpCancel, Exec: pick(live).id} })
	}
	total := 0
	for _, c := range cs {
		total += c.weight
	}
	k := r.rnd.IntN(total)
	for _, c := range cs {
		if k < c.weight {
			return c.draw()
		}
		k -= c.weight
	}
	panic("dst: weighted choice fell through")
}

// target is an execution an operation may act on, and the gate or topic.
type target struct{ id, name string }

// targets are what the world offers the next operation.
type targets struct {
	gates, topics, doubts, live []target
	// undriven says some execution is running with no driver.
	undriven bool
}

// targetsOf lists, in id order, the gates to answer (a park's, a select's
// gate waits), the topics to send to (a select's message waits, the
// flow's Topics), the in-doubt parks and the executions not ended.
func (r *run) targetsOf(w world) targets {
	var t targets
	for _, x := range w.execs {
		if x.State.Status.Terminal() {
			continue
		}
		t.live = append(t.live, target{id: x.ID})
		if x.userGate() {
			t.gates = append(t.gates, target{x.ID, x.parkedOn()})
		}
		if x.parkedOn() == fold.GateInDoubt {
			t.doubts = append(t.doubts, target{id: x.ID})
		}
		if x.running() && !r.proc.track.isLive(x.ID) {
			t.undriven = true
		}
		var ts []string
		for _, wt := range x.waits() {
			switch wt.Kind {
			case "gate":
				t.gates = append(t.gates, target{x.ID, wt.On})
			case "message":
				ts = append(ts, wt.Topic)
			}
		}
		if f := r.flows[x.Flow]; f != nil {
			ts = append(ts, f.Topics...)
		}
		slices.Sort(ts)
		for _, topic := range slices.Compact(ts) {
			t.topics = append(t.topics, target{x.ID, topic})
		}
	}
	return t
}

// rootFlows are the flows the simulator starts itself, in Simulation order.
func (r *run) rootFlows() []*Flow {
	var out []*Flow
	for i := range r.sim.Flows {
		if r.sim.Flows[i].Input != nil {
			out = append(out, &r.sim.Flows[i])
		}
	}
	return out
}

// nextTimer returns the earliest stored timer's wakeAt.
func (r *run) nextTimer() (int64, bool) {
	ctx, cancel := r.callCtx()
	defer cancel()
	due, err := r.timers.Due(ctx, math.MaxInt64, 1)
	if err != nil || len(due) == 0 {
		return 0, false
	}
	return due[0].WakeAt, true
}

// answer draws the answer to id's gate from its flow's Answer.
func (r *run) answer(w world, id, gate string, rnd *rand.Rand) any {
	x, _ := w.get(id)
	if f := r.flows[x.Flow]; f != nil && f.Answer != nil {
		return f.Answer(rnd, gate)
	}
	return true
}

// message draws a message for id's topic from its flow's Message.
func (r *run) message(w world, id, topic string, rnd *rand.Rand) any {
	x, _ := w.get(id)
	if f := r.flows[x.Flow]; f != nil && f.Message != nil {
		return f.Message(rnd, topic)
	}
	return rnd.IntN(100)
}
