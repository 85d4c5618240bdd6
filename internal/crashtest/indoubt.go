package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// InDoubtPark is an in-doubt park runtime B met (K9): a non-idempotent
// step attempt whose STEP_STARTED the crash left durable without an
// outcome, and the verdict the kit gave it as an operator would — after
// looking at the world: Done with the output the effect produced when
// World.Charged holds the attempt's key (the effect acted before the
// crash), a re-run otherwise (it never acted).
type InDoubtPark struct {
	StepID  string
	Attempt int64
	// Done is the verdict: the effect had acted; Output is what it
	// produced. False: it had not, and runs again as attempt Attempt+1.
	Done   bool
	Output json.RawMessage

	counts map[string]int64 // the world's counters when B reported the park
}

// String renders the park for reports: "charge#1 done" or "charge#1 rerun".
func (p InDoubtPark) String() string {
	v := "rerun"
	if p.Done {
		v = "done"
	}
	return p.StepID + "#" + strconv.FormatInt(p.Attempt, 10) + " " + v
}

// resolveInDoubt answers the in-doubt park st through rt with the verdict
// the world w supports.
func resolveInDoubt(ctx context.Context, rt *loom.Runtime, st fold.State, w *World) (InDoubtPark, error) {
	on := st.Variables.SuspendedOn
	p := InDoubtPark{StepID: on.StepID, counts: w.Counters.Snapshot()}
	if on.Attempt == nil {
		return p, errors.New("the in-doubt park names no attempt")
	}
	p.Attempt = *on.Attempt
	p.Output, p.Done = w.Charged.Payload(effect.IdempotencyKey(ExecutionID, p.StepID, p.Attempt))
	return p, rt.ResolveInDoubt(ctx, ExecutionID, loom.Verdict{StepID: p.StepID, Attempt: p.Attempt, Done: p.Done, Output: p.Output})
}

// stepAttempt names one attempt of a step.
type stepAttempt struct {
	step    string
	attempt int64
}

func (s stepAttempt) String() string { return s.step + "#" + strconv.FormatInt(s.attempt, 10) }

// inDoubtExpected returns the attempts a recovery of the durable log must
// park in doubt: for each non-idempotent step, its last STEP_STARTED when
// no outcome follows it.
func inDoubtExpected(spec flowSpec, durable []event.Envelope) []stepAttempt {
	open := map[string]int64{}
	for _, e := range durable {
		id := stepIDOf(e)
		if !slices.Contains(spec.nonIdempotent, id) {
			continue
		}
		switch e.Type {
		case event.StepStarted:
			open[id] = attemptOf(e)
		case event.StepCompleted, event.StepFailed:
			delete(open, id)
		}
	}
	var out []stepAttempt
	for _, id := range spec.nonIdempotent {
		if a, ok := open[id]; ok {
			out = append(out, stepAttempt{id, a})
		}
	}
	return out
}

// checkInDoubt checks runtime B's in-doubt parks against the crashed run's
// durable log and the final log: B parked exactly on the attempts the log
// left in doubt; each park follows an EFFECT_INDOUBT fact B appended, is
// an EXECUTION_SUSPENDED on the reserved gate naming the step and attempt,
// and is answered by the kernel verdict and a resume; B did not run the
// step while it was parked; the log holds no other EFFECT_INDOUBT.
func checkInDoubt(rep *report, spec flowSpec, a crashed, parks []InDoubtPark, log []event.Envelope) {
	want := inDoubtExpected(spec, a.log)
	got := make([]stepAttempt, len(parks))
	for i, p := range parks {
		got[i] = stepAttempt{p.StepID, p.Attempt}
	}
	if !slices.Equal(got, want) {
		rep.add(PropInDoubt, "recovery parked in doubt on %v, want %v (non-idempotent starts the crash left without an outcome)", got, want)
	}
	var facts []stepAttempt
	for _, e := range log {
		if e.Type == event.EffectInDoubt {
			facts = append(facts, stepAttempt{stepIDOf(e), attemptOf(e)})
		}
	}
	if !slices.Equal(facts, got) {
		rep.add(PropInDoubt, "the log records EFFECT_INDOUBT for %v, want one per park %v", facts, got)
	}
	for _, p := range parks {
		if n, m := p.counts[p.StepID], a.counts[p.StepID]; n != m {
			rep.add(PropInDoubt, "%s acted %d times before the crash and %d by the time recovery parked it in doubt: it ran again", p.StepID, m, n)
		}
		checkParkRecord(rep, len(a.log), stepAttempt{p.StepID, p.Attempt}, log)
	}
}

// checkParkRecord checks the events of one in-doubt park in the final log:
// after the durable prefix, EFFECT_INDOUBT, then EXECUTION_SUSPENDED on
// the reserved gate with the step and attempt, then the kernel's verdict
// (DECISION_RECORDED) and a null EXECUTION_RESUMED.
func checkParkRecord(rep *report, from int, sa stepAttempt, log []event.Envelope) {
	steps := []struct {
		what string
		ok   func(event.Envelope) bool
	}{
		{"EFFECT_INDOUBT", func(e event.Envelope) bool {
			return e.Type == event.EffectInDoubt && stepIDOf(e) == sa.step && attemptOf(e) == sa.attempt
		}},
		{"EXECUTION_SUSPENDED on " + fold.GateInDoubt, func(e event.Envelope) bool {
			var p struct {
				On      string `json:"on"`
				StepID  string `json:"stepId"`
				Attempt *int64 `json:"attempt"`
			}
			return e.Type == event.ExecutionSuspended && json.Unmarshal(e.Payload, &p) == nil &&
				p.On == fold.GateInDoubt && p.StepID == sa.step && p.Attempt != nil && *p.Attempt == sa.attempt
		}},
		{"the kernel's verdict", func(e event.Envelope) bool {
			return e.Type == event.DecisionRecorded && e.Kernel() && decisionIDOf(e) == verdictDecisionID(sa)
		}},
		{"EXECUTION_RESUMED", func(e event.Envelope) bool { return e.Type == event.ExecutionResumed }},
	}
	i := from
	for _, s := range steps {
		for i < len(log) && !s.ok(log[i]) {
			i++
		}
		if i == len(log) {
			rep.add(PropInDoubt, "the in-doubt park of %v lacks %s, in this order after event %d", sa, s.what, from)
			return
		}
		i++
	}
}

// verdictPrefix starts the reserved decision id of an operator's verdict
// on an in-doubt step attempt: "__loom_verdict:<stepId>#<attempt>" (K9.3).
const verdictPrefix = "__loom_verdict:"

func verdictDecisionID(sa stepAttempt) string { return verdictPrefix + sa.String() }

// normalizeInDoubt removes from a normalised state exactly what the parks
// and their verdicts add to an uncrashed run's — the _inDoubt facts, the
// verdict decisions, and the attempt a re-run verdict moved on by one —
// and reports anything of that kind the parks do not account for.
func normalizeInDoubt(rep *report, norm map[string]any, parks []InDoubtPark) {
	vars, _ := norm["variables"].(map[string]any)
	facts, _ := vars["_inDoubt"].(map[string]any)
	decisions, _ := vars["_decisions"].(map[string]any)
	frames, _ := norm["frames"].(map[string]any)
	for _, p := range parks {
		sa := stepAttempt{p.StepID, p.Attempt}
		if _, ok := facts[fold.InDoubtKey(p.StepID, p.Attempt)]; !ok {
			rep.add(PropInDoubt, "the final state has no _inDoubt fact for %v", sa)
		}
		delete(facts, fold.InDoubtKey(p.StepID, p.Attempt))
		checkVerdictDecision(rep, sa, p, decisions[verdictDecisionID(sa)])
		delete(decisions, verdictDecisionID(sa))
		fr, _ := frames[p.StepID].(map[string]any)
		if fr == nil || p.Done {
			continue
		}
		if got := fmt.Sprint(fr["attempt"]); got != strconv.FormatInt(p.Attempt+1, 10) {
			rep.add(PropInDoubt, "%s was re-run after %v as attempt %s, want %d", p.StepID, sa, got, p.Attempt+1)
		}
		fr["attempt"] = json.Number(strconv.FormatInt(p.Attempt, 10))
	}
	for k := range facts { //loom:order-independent each is reported alone
		rep.add(PropInDoubt, "the final state holds an in-doubt fact %s no park accounts for", k)
	}
	for k := range decisions { //loom:order-independent each is reported alone
		if strings.HasPrefix(k, verdictPrefix) {
			rep.add(PropInDoubt, "the final state holds a verdict %s no park accounts for", k)
		}
	}
	if vars == nil {
		return
	}
	if facts != nil && len(facts) == 0 {
		delete(vars, "_inDoubt")
	}
	if decisions != nil && len(decisions) == 0 {
		delete(vars, "_decisions")
	}
}

// checkVerdictDecision checks the recorded verdict choice of park p.
func checkVerdictDecision(rep *report, sa stepAttempt, p InDoubtPark, d any) {
	dm, _ := d.(map[string]any)
	choice, _ := dm["choice"].(map[string]any)
	want := "rerun"
	if p.Done {
		want = "done"
	}
	if choice == nil || choice["verdict"] != want {
		rep.add(PropInDoubt, "the verdict on %v is recorded as %s, want %q", sa, compact(d), want)
	}
}

// attemptOf returns the attempt of a STEP_STARTED or EFFECT_INDOUBT
// payload (0 when it has none).
func attemptOf(e event.Envelope) int64 {
	var p struct {
		Attempt int64 `json:"attempt"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.Attempt
}
