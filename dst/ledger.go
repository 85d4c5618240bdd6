package dst

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/fold"
)

// effectLedger is the outside world's count of effect executions: the
// innermost middleware ring of every process of a run sees each live
// attempt of every step, keyed by its idempotency key
// ("<execution>/<step>/<attempt>"). It outlives crashes, as effects do.
//
// Before an effect runs it checks the durable log: a step whose outcome
// is recorded there (completed, or failed on a typed channel) must be
// served from the log, never run again; and a step the flow declares
// non-idempotent runs at most once under one key (K9: a crash after its
// start parks it in doubt, and a re-run is a new attempt).
type effectLedger struct {
	r *run

	mu   sync.Mutex
	runs map[string]*effectRun
}

// effectRun is what the world saw of one idempotency key.
type effectRun struct {
	count  int
	acted  bool // an attempt returned without error: the effect happened
	output json.RawMessage
}

func newEffectLedger(r *run) *effectLedger { return &effectLedger{r: r, runs: map[string]*effectRun{}} }

// middleware is the ring of process p. It is also where a
// FaultEffectCrash kills p inside a non-idempotent effect, before it acts:
// the effect does not run, and every later call about its execution
// fails.
func (l *effectLedger) middleware(p *process) effect.Middleware {
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		flow := l.before(ec)
		if l.r.nonIdempotent(flow, ec.StepID) &&
			l.r.plan.fire2(FaultEffectCrash, ec.ExecutionID, ec.StepID, ec.Attempt) {
			p.stop(ec.ExecutionID)
			return nil, fmt.Errorf("%w inside the effect of %s", ErrCrashed, ec.IdempotencyKey)
		}
		l.count(ec, flow)
		out, err := next(ec, in)
		l.after(ec, out, err)
		return out, err
	}
}

// before checks that ec's step has no outcome in the durable log, and
// returns the execution's flow.
func (l *effectLedger) before(ec *effect.Context) string {
	evs, err := l.r.events.ReadFrom(context.Background(), ec.ExecutionID, 0)
	flow := ""
	if err == nil && len(evs) > 0 {
		flow = evs[len(evs)-1].WorkflowID
		st := fold.Fold(evs)
		if fr, ok := st.Frames[ec.StepID]; ok && recordedOutcome(fr) {
			l.r.violate(InvStepRerun, ec.ExecutionID, fmt.Sprintf(
				"step %q ran again (attempt %d, key %s) though its outcome is in the log (%s, recorded at attempt %d)",
				ec.StepID, ec.Attempt, ec.IdempotencyKey, fr.Status, fr.Attempt))
		}
	}
	return flow
}

// count counts one run of ec's effect.
func (l *effectLedger) count(ec *effect.Context, flow string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	run := l.runs[ec.IdempotencyKey]
	if run == nil {
		run = &effectRun{}
		l.runs[ec.IdempotencyKey] = run
	}
	run.count++
	if run.count > 1 && l.r.nonIdempotent(flow, ec.StepID) {
		l.r.violate(InvStepRerun, ec.ExecutionID, fmt.Sprintf(
			"non-idempotent step %q ran %d times under one idempotency key %s", ec.StepID, run.count, ec.IdempotencyKey))
	}
}

func (l *effectLedger) after(ec *effect.Context, out json.RawMessage, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run := l.runs[ec.IdempotencyKey]; run != nil && err == nil {
		run.acted, run.output = true, out
	}
}

// outcome returns what the world saw of key: whether the effect acted and
// with which output.
func (l *effectLedger) outcome(key string) (acted bool, output json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if run := l.runs[key]; run != nil {
		return run.acted, run.output
	}
	return false, nil
}

// recordedOutcome reports whether fr holds an outcome replay serves.
func recordedOutcome(fr fold.Frame) bool {
	return fr.Status == fold.FrameCompleted || fr.Status == fold.FrameFailed && fr.ErrorChannel != ""
}
