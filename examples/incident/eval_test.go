package main

// An eval suite over the remediation flow (package eval, docs/evals.md):
// the scenarios the committed cassette was recorded for, graded on the
// outcome, the plan apply_fix was asked to run and the summary's shape.
// Replayed from the cassette the suite passes, and passes the same way,
// byte for byte, on every run; a planner that has regressed — it restarts
// where the diagnosis calls for a rollback — is caught by Compare, naming
// the cases and the grader that got worse.

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/loomtest"
)

// plannerSuiteName names the suite, and so its cases' execution ids
// ("eval.incident-planner.approved").
const plannerSuiteName = "incident-planner"

// plannerEvalCases are the suite's cases: scenarios of record.go (whose
// requests the committed cassette holds; timed-out is left out, since a
// suite answers gates as a person does, never by a gate's timer) and what
// each summary must say.
var plannerEvalCases = []struct {
	scenario string
	outcome  string
	variant  string // of the plan apply_fix was asked to run, as approved (or edited)
}{
	{"approved", outcomeFixed, "rollback"},
	{"rejected", outcomeEscalated, "rollback"},
	{"edited", outcomeFixed, "scale-out"},
	{"memory", outcomeFixed, "restart"},
}

// applyGates is the gate family of apply_fix's approvals: each gate is
// named after the digest of the call it approves.
const applyGates = agent.GatePrefix + toolApply + ":*"

// summarySchema is the shape of the flow's Summary: a fixed (or
// not-recovered) incident carries the fix and the recovery check, an
// escalated one the page and its reason.
const summarySchema = `{
  "type": "object",
  "required": ["incident", "service", "at", "outcome", "planner"],
  "properties": {
    "outcome": {"enum": ["fixed", "not-recovered", "escalated"]},
    "plan": {
      "type": "object",
      "required": ["variant", "action", "risk"],
      "properties": {"variant": {"enum": ["rollback", "scale-out", "restart"]}}
    },
    "planner": {
      "type": "object",
      "required": ["model", "turns", "call"],
      "properties": {"turns": {"type": "integer", "minimum": 1, "maximum": 8}}
    }
  },
  "allOf": [
    {"if": {"properties": {"outcome": {"enum": ["fixed", "not-recovered"]}}},
     "then": {"required": ["plan", "fix", "recovery"]}},
    {"if": {"properties": {"outcome": {"const": "escalated"}}},
     "then": {"required": ["reason", "escalation"]}}
  ]
}`

// plannerSuite is the suite: each case the scenario's input, its
// approver's answer at apply_fix's gate, and the expected outcome and
// plan variant.
func plannerSuite(t *testing.T) eval.Suite {
	t.Helper()
	s := eval.Suite{Name: plannerSuiteName, Flow: flowID, Graders: []eval.Grader{
		eval.Exact{ID: "outcome", Path: "/outcome"},
		eval.Exact{ID: "plan-variant", Path: "/plan/variant"},
		eval.JSONSchema{ID: "summary-shape", Schema: json.RawMessage(summarySchema)},
	}}
	for _, c := range plannerEvalCases {
		i := slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.name == c.scenario })
		if i < 0 || scenarios[i].answer == nil {
			t.Fatalf("record.go has no answered scenario %q: the cassette holds no requests for it", c.scenario)
		}
		sc := scenarios[i]
		// The answer functions read only the call's service (editTo
		// replaces the variant), so one request serves every planner.
		answer := sc.answer(agent.ApprovalRequest{Agent: plannerID, StepID: applyStep, Tool: toolApply,
			Arguments: mustJSON(applyArgs{Service: sc.input.Service})})
		s.Cases = append(s.Cases, eval.Case{Name: sc.name, Input: mustJSON(sc.input),
			Answers:  []eval.Answer{{Gate: applyGates, Payload: mustJSON(answer)}},
			Expected: mustJSON(map[string]any{"outcome": c.outcome, "plan": map[string]string{"variant": c.variant}})})
	}
	return s
}

// runPlannerSuite runs the suite as one process over m: the flow, its
// effects and a runbook server of its own (process), on the memory stores
// eval.Run provides, with a clock that stands still so the summaries'
// "at" is the same on every run. It returns the report and what the
// process ran.
func runPlannerSuite(t *testing.T, m model) (eval.Report, *effectCounter) {
	t.Helper()
	fx := newEffectCounter()
	cfg, _ := process(t, loom.Config{Clock: loomtest.NewClock(time.Time{}), TimerPoll: -1}, fx, m)
	rep, err := eval.Run(testContext(t), cfg, plannerSuite(t))
	if err != nil {
		t.Fatal(err)
	}
	return rep, fx
}

// restartingPlanner is a regressed planner: the scripted model, except
// that it ignores the diagnoses and the runbook and asks apply_fix for
// the plain restart, the plan propose_fix lists last for a bad deploy. The
// pods come back, so the incident still ends "fixed": only a grader on the
// plan tells the two planners apart. It is a pure function of the
// request, like the model it wraps, and makes no network call.
type restartingPlanner struct{ scriptedModel }

// Complete implements llm.Provider.
func (p restartingPlanner) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	resp, err := p.scriptedModel.Complete(ctx, req, nil)
	if err != nil {
		return resp, err
	}
	for i, c := range resp.ToolCalls {
		var args applyArgs
		if c.Name != toolApply || json.Unmarshal(c.Arguments, &args) != nil {
			continue
		}
		args.Variant = "restart"
		resp.ToolCalls[i].Arguments = mustJSON(args)
		resp.Text = "Recommended: restart the " + args.Service + " pods (low risk), the safest plan. Asking to apply it."
	}
	resp.Usage.OutputTokens = int64(answerBytes(resp)/4 + 1)
	if sink != nil {
		if resp.Text != "" {
			sink(llm.Delta{Text: resp.Text})
		}
		for i, c := range resp.ToolCalls {
			sink(llm.Delta{ToolIndex: i, ToolID: c.ID, ToolName: c.Name, Arguments: string(c.Arguments)})
		}
	}
	return resp, nil
}

// TestEvalSuiteDetectsAPlannerRegression runs the suite with the committed
// cassette as the planner (the baseline: every case passes), then with the
// restarting planner (the candidate): Compare flags the two checkout cases
// where the planner's choice stands (approved, rejected), not the edited
// one (the approver replaced it with scale-out) nor the memory one
// (restart is the right plan there), and names the plan-variant grader;
// the outcome and shape graders see nothing wrong. A
// second baseline run gives the same report, byte for byte.
func TestEvalSuiteDetectsAPlannerRegression(t *testing.T) {
	base, baseFx := runPlannerSuite(t, committedModel(t))
	if !base.Passed {
		t.Fatalf("the baseline does not pass:\n%s", base.Markdown(nil))
	}
	for _, c := range base.Cases {
		if !c.Passed || c.Error != "" {
			t.Errorf("baseline case %s: passed %v, error %q, grades %+v", c.Name, c.Passed, c.Error, c.Grades)
		}
	}
	// Three cases applied a fix, one escalated; each case asked for 4 turns.
	if baseFx.runs(applyStep) != 3 || baseFx.runs(stepEscalate) != 1 || baseFx.modelCalls() != 4*len(plannerEvalCases) {
		t.Errorf("the baseline ran apply_fix %d times, escalate %d, the model %d; want 3, 1, %d",
			baseFx.runs(applyStep), baseFx.runs(stepEscalate), baseFx.modelCalls(), 4*len(plannerEvalCases))
	}

	cand, candFx := runPlannerSuite(t, model{provider: restartingPlanner{}, name: scriptedModelName, meter: frozenMeter})
	if cand.Passed {
		t.Fatalf("the regressed planner passes the suite:\n%s", cand.Markdown(nil))
	}
	if candFx.runs(applyStep) != 3 {
		t.Errorf("the candidate ran apply_fix %d times, want 3: the regression is the plan, not the path", candFx.runs(applyStep))
	}
	// Strict thresholds: the candidate spent fewer tokens (its plan's
	// words are shorter), so only what it did is flagged.
	cmp := eval.Compare(base, cand, eval.Thresholds{})
	if !cmp.Regressed() {
		t.Fatalf("Compare missed the regression:\n%s", cmp)
	}
	var got []string
	for _, r := range cmp.Regressions {
		got = append(got, strings.Join(slices.DeleteFunc([]string{r.Scope, r.Case, r.Grader, r.Metric}, func(s string) bool { return s == "" }), " "))
	}
	want := []string{
		"case approved plan-variant pass",
		"case rejected plan-variant pass",
		"grader plan-variant passRate",
		"grader plan-variant meanScore",
	}
	if !slices.Equal(got, want) {
		t.Errorf("regressions %q, want %q\n%s", got, want, cmp)
	}
	for _, line := range []string{
		"4 regression(s): 4/4 cases passed in the baseline, 2/4 in the candidate",
		`REGRESSION case approved plan-variant: passed, now fails: the output at /plan/variant is "restart", expected "rollback"`,
		`REGRESSION case rejected plan-variant: passed, now fails: the output at /plan/variant is "restart", expected "rollback"`,
		"REGRESSION grader plan-variant: pass rate dropped from 100% to 50%",
	} {
		if !strings.Contains(cmp.String(), line) {
			t.Errorf("the comparison does not say %q:\n%s", line, cmp)
		}
	}
	t.Logf("baseline against the restarting planner:\n%s", cmp)

	again, _ := runPlannerSuite(t, committedModel(t))
	if !bytes.Equal(base.JSON(), again.JSON()) {
		t.Fatalf("two baseline runs gave different reports:\n%s\n%s", base.JSON(), again.JSON())
	}
	if same := eval.Compare(base, again, eval.Thresholds{}); same.Regressed() {
		t.Errorf("the baseline regressed against itself:\n%s", same)
	}
}
