package eval_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// caseOf returns the result of the named case.
func caseOf(t *testing.T, rep eval.Report, name string) eval.CaseResult {
	t.Helper()
	for _, c := range rep.Cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s in the report", name)
	return eval.CaseResult{}
}

// keys lists the changes of a section as key.field.
func keys(cs []eval.Change) []string {
	var out []string
	for _, c := range cs {
		k := c.Key
		if c.Field != "" {
			k += "." + c.Field
		}
		out = append(out, string(c.Kind)+" "+k)
	}
	return out
}

// TestDiffRunsStepDecisionGate diffs two real executions of the triage
// flow that differ in step outputs (the signals, the plan), a decision
// (the severity) and a gate answer (who approved), and checks that the
// diff of a run with its own re-run, whose event ids and timestamps
// differ, is empty.
func TestDiffRunsStepDecisionGate(t *testing.T) {
	rep := runTriage(t, committed(t), false)
	a, b := caseOf(t, rep, "latency"), caseOf(t, rep, "errors")
	d := eval.DiffRuns(a.Log, b.Log)

	wantSteps := []string{"changed apply-fix.output", "changed collect-signals.output", "changed plan.output"}
	if got := keys(d.Steps); !slices.Equal(got, wantSteps) {
		t.Errorf("steps: got %q, want %q", got, wantSteps)
	}
	if got, want := keys(d.Decisions), []string{"changed severity.choice"}; !slices.Equal(got, want) {
		t.Errorf("decisions: got %q, want %q", got, want)
	}
	if len(d.Decisions) == 1 && (string(d.Decisions[0].From) != `"high"` || string(d.Decisions[0].To) != `"low"`) {
		t.Errorf("severity: got %s -> %s, want \"high\" -> \"low\"", d.Decisions[0].From, d.Decisions[0].To)
	}
	if got, want := keys(d.Gates), []string{"changed gate 1.answer"}; !slices.Equal(got, want) {
		t.Errorf("gates: got %q, want %q (same gate, another answer)", got, want)
	}
	if got, want := keys(d.Execution), []string{"changed execution.output"}; !slices.Equal(got, want) {
		t.Errorf("execution: got %q, want %q", got, want)
	}
	if len(d.Costs) != 0 {
		t.Errorf("costs: the two runs spent the same, got %q", keys(d.Costs))
	}
	for _, want := range []string{"~ severity.choice: \"high\" -> \"low\"", "~ gate 1.answer: {\"approved\":true,\"by\":\"ann\"} -> {\"approved\":true,\"by\":\"dan\"}"} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("String() lacks %q:\n%s", want, d)
		}
	}
	var back eval.Diff
	if err := json.Unmarshal(d.JSON(), &back); err != nil || len(back.Steps) != 3 || len(back.Gates) != 1 {
		t.Errorf("the JSON form does not read back: %v %s", err, d.JSON())
	}

	again := caseOf(t, runTriage(t, committed(t), false), "latency")
	if a.Log[0].ID == again.Log[0].ID {
		t.Fatal("the re-run reused event ids; the test would not prove they are ignored")
	}
	if d := eval.DiffRuns(a.Log, again.Log); !d.Empty() {
		t.Errorf("a run and its re-run differ:\n%s", d)
	}
}

// TestDiffRunsAddedAndRemoved checks steps and gates present in one run
// only, and a cost change, on the regressed candidate.
func TestDiffRunsAddedAndRemoved(t *testing.T) {
	c := committed(t)
	base, cand := caseOf(t, runTriage(t, c, false), "latency"), caseOf(t, runTriage(t, c, true), "latency")
	d := eval.DiffRuns(base.Log, cand.Log)
	if got, want := keys(d.Steps), []string{"removed apply-fix", "added plan-review"}; !slices.Equal(got, want) {
		t.Errorf("steps: got %q, want %q", got, want)
	}
	if got, want := keys(d.Costs), []string{"changed costs.modelCalls", "changed costs.tokens", "changed costs.costUsd"}; !slices.Equal(got, want) {
		t.Errorf("costs: got %q, want %q", got, want)
	}
	if d := eval.DiffRuns(base.Log, nil); len(d.Gates) != 1 || d.Gates[0].Kind != eval.Removed {
		t.Errorf("against an empty log the gate is removed, got %q", keys(d.Gates))
	}
}

// TestGraders checks every built-in grader passes a case it should and
// fails one it should, with a reason.
func TestGraders(t *testing.T) {
	out := json.RawMessage(`{"outcome":"fixed","fix":"rollback","n":3}`)
	subject := func(expected string) eval.Subject {
		return eval.Subject{Case: eval.Case{Name: "c", Expected: json.RawMessage(expected)}, Status: fold.StatusCompleted, Output: out}
	}
	tests := []struct {
		name     string
		g        eval.Grader
		expected string
		pass     bool
		reason   string
	}{
		{"exact whole", eval.Exact{}, `{"n":3,"fix":"rollback","outcome":"fixed"}`, true, "equals"},
		{"exact whole differs", eval.Exact{}, `{"n":4,"fix":"rollback","outcome":"fixed"}`, false, "expected"},
		{"exact path", eval.Exact{Path: "/outcome"}, `{"outcome":"fixed","other":1}`, true, "equals"},
		{"exact path differs", eval.Exact{Path: "/fix"}, `{"fix":"restart"}`, false, `is "rollback", expected "restart"`},
		{"exact no expected", eval.Exact{}, ``, false, "no expected value"},
		{"exact path missing in output", eval.Exact{Path: "/plan"}, `{"plan":1}`, false, "nothing at /plan"},
		{"regex path", eval.Regex{Path: "/fix", Pattern: "^roll"}, ``, true, "matches"},
		{"regex path fails", eval.Regex{Path: "/fix", Pattern: "^restart$"}, ``, false, "does not match"},
		{"regex whole output", eval.Regex{Pattern: `"n":3`}, ``, true, "matches"},
		{"regex number", eval.Regex{Path: "/n", Pattern: `^[0-2]$`}, ``, false, "does not match"},
		{"schema", eval.JSONSchema{Schema: json.RawMessage(`{"type":"object","required":["outcome"]}`)}, ``, true, "satisfies"},
		{"schema fails", eval.JSONSchema{Path: "/n", Schema: json.RawMessage(`{"type":"integer","minimum":5}`)}, ``, false, "at /: is below the minimum"},
		{"schema missing member", eval.JSONSchema{Schema: json.RawMessage(`{"required":["plan"]}`)}, ``, false, "plan"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.g.Grade(context.Background(), subject(tc.expected))
			if err != nil {
				t.Fatal(err)
			}
			if g.Pass != tc.pass || (g.Score == 1) != tc.pass || !strings.Contains(g.Reason, tc.reason) {
				t.Errorf("got pass %v score %v reason %q, want pass %v and a reason with %q", g.Pass, g.Score, g.Reason, tc.pass, tc.reason)
			}
		})
	}
	if _, err := (eval.Regex{Pattern: "("}).Grade(context.Background(), subject("")); err == nil {
		t.Error("an invalid pattern graded")
	}
	if _, err := (eval.JSONSchema{Schema: json.RawMessage(`{"type":`)}).Grade(context.Background(), subject("")); err == nil {
		t.Error("an invalid schema graded")
	}
}

// TestLLMJudgeThroughCassetteIsDeterministic runs the suite twice on the
// committed cassette: the judge passes the right outcomes, and the two
// reports are byte-identical (JSON and Markdown), the judge's model call
// recorded as a step of its judging execution.
func TestLLMJudgeThroughCassetteIsDeterministic(t *testing.T) {
	first := runTriage(t, committed(t), false)
	second := runTriage(t, committed(t), false)
	if !bytes.Equal(first.JSON(), second.JSON()) {
		t.Fatalf("two runs gave different reports:\n%s\n%s", first.JSON(), second.JSON())
	}
	if !bytes.Equal(first.Markdown(nil), second.Markdown(nil)) {
		t.Fatal("two runs gave different Markdown reports")
	}
	if !first.Passed {
		t.Fatalf("the baseline does not pass:\n%s", first.Markdown(nil))
	}
	for _, c := range first.Cases {
		g := c.Grades[3]
		if g.Grader != "judge" || !g.Pass || g.Score != 0.9 || g.Costs == nil || g.Costs.ModelCalls != 1 || g.Costs.CostUSD <= 0 {
			t.Errorf("case %s: judge grade %+v", c.Name, g)
		}
	}
	if first.JudgeCosts.ModelCalls != 4 || first.Costs.ModelCalls != 4 {
		t.Errorf("costs: cases %+v, judges %+v; want 4 model calls each", first.Costs, first.JudgeCosts)
	}

	cand := runTriage(t, committed(t), true)
	judge := caseOf(t, cand, "latency").Grades[3]
	if judge.Pass || judge.Score != 0.1 || !strings.Contains(judge.Reason, "not the one") {
		t.Errorf("the judge passed an escalated approved fix: %+v", judge)
	}
}

// TestLLMJudgeFailures: a request the cassette does not hold, and an
// answer that is not a verdict, fail the grade with the reason.
func TestLLMJudgeFailures(t *testing.T) {
	s := triageSuite(committed(t))
	s.Graders = []eval.Grader{eval.LLMJudge{ID: "judge", Provider: committed(t), Model: model, Rubric: "another rubric"}}
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(committed(t), false)}}, s)
	if err != nil {
		t.Fatal(err)
	}
	g := rep.Cases[0].Grades[0]
	if g.Pass || g.Score != 0 || !strings.Contains(g.Reason, "could not grade") || !strings.Contains(g.Reason, "holds no request") {
		t.Errorf("an unrecorded judge request: %+v", g)
	}
	if rep.Passed {
		t.Error("a suite whose judge could not grade passed")
	}
}

// TestCompareFlagsTheRegressedCandidate runs the suite over the baseline
// flow and over a candidate that escalates approved fixes and makes an
// extra model call: Compare flags the cases, the graders and the cost;
// generous thresholds let the grader and cost checks through, never a
// case that stopped passing.
func TestCompareFlagsTheRegressedCandidate(t *testing.T) {
	c := committed(t)
	base, cand := runTriage(t, c, false), runTriage(t, c, true)
	cmp := eval.Compare(base, cand, eval.Thresholds{})
	if !cmp.Regressed() {
		t.Fatal("the regressed candidate was not flagged")
	}
	var got []string
	for _, r := range cmp.Regressions {
		got = append(got, where(r))
	}
	for _, want := range []string{"case latency same-outcome", "case latency judge", "case memory judge", "case errors same-outcome",
		"grader same-outcome passRate", "grader judge meanScore", "costs tokens", "costs costUsd"} {
		if !slices.Contains(got, want) {
			t.Errorf("no regression %q in %q", want, got)
		}
	}
	if slices.Contains(got, "case rejected judge") {
		t.Error("the rejected case did not regress, but was flagged")
	}
	if !strings.HasPrefix(cmp.Summary, "12 regression(s): 4/4 cases passed in the baseline, 1/4 in the candidate") {
		t.Errorf("summary: %s", cmp.Summary)
	}

	loose := eval.Compare(base, cand, eval.Thresholds{PassRateDrop: 0.8, MeanScoreDrop: 0.8, ScoreDrop: 1, CostIncrease: 2})
	for _, r := range loose.Regressions {
		if r.Scope != "case" || r.Metric != "pass" {
			t.Errorf("beyond no threshold, yet flagged: %+v", r)
		}
	}
	if !loose.Regressed() {
		t.Error("cases that stopped passing were let through by thresholds")
	}
	if same := eval.Compare(base, runTriage(t, c, false), eval.Thresholds{}); same.Regressed() {
		t.Errorf("the baseline regressed against itself: %s", same)
	}
	off := eval.Compare(base, cand, eval.Thresholds{PassRateDrop: -1, MeanScoreDrop: -1, ScoreDrop: -1, CostIncrease: -1})
	for _, r := range off.Regressions {
		if r.Scope == "grader" || r.Scope == "costs" {
			t.Errorf("a check turned off still flagged %+v", r)
		}
	}
}

// where is how these tests name a regression: its scope, case and
// grader, and the metric of a grader's or the costs' one.
func where(r eval.Regression) string {
	parts := []string{r.Scope}
	for _, p := range []string{r.Case, r.Grader} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if r.Scope != "case" {
		parts = append(parts, r.Metric)
	}
	return strings.Join(parts, " ")
}

// TestFixturesReplayRecordedRuns turns the baseline's logs into a suite
// (SuiteFromLogs): the same code reproduces every recorded output; the
// regressed code does not, and the Exact grader says where.
func TestFixturesReplayRecordedRuns(t *testing.T) {
	c := committed(t)
	base := runTriage(t, c, false)
	var logs [][]event.Envelope
	for _, cr := range base.Cases {
		logs = append(logs, cr.Log)
	}
	s, err := eval.SuiteFromLogs("fixtures", logs...)
	if err != nil {
		t.Fatal(err)
	}
	if s.Flow != triageFlowID || len(s.Cases) != 4 || s.Cases[0].Name != "eval.triage.latency" || len(s.Cases[0].Answers) != 1 ||
		s.Cases[0].Answers[0].Gate != "approve:checkout" || string(s.Cases[0].Answers[0].Payload) != `{"approved":true,"by":"ann"}` {
		t.Fatalf("fixture suite: %+v", s)
	}
	same, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(c, false)}}, s)
	if err != nil {
		t.Fatal(err)
	}
	if !same.Passed {
		t.Fatalf("the code that recorded the fixtures does not reproduce them:\n%s", same.Markdown(nil))
	}
	changed, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(c, true)}}, s)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Passed || changed.Graders[0].Passed != 1 {
		t.Fatalf("the regressed code reproduced the fixtures:\n%s", changed.Markdown(nil))
	}

	if _, err := eval.CaseFromLog(logs[0][:5]); !errors.Is(err, eval.ErrNotAFixture) {
		t.Errorf("a log of a running execution became a fixture: %v", err)
	}
	if _, err := eval.CaseFromLog(nil); !errors.Is(err, eval.ErrNotAFixture) {
		t.Errorf("an empty log became a fixture: %v", err)
	}
	if _, err := eval.SuiteFromLogs("twice", logs[0], logs[0]); !errors.Is(err, eval.ErrNotAFixture) {
		t.Errorf("one execution twice made a suite: %v", err)
	}
}

// TestRunRecordsCasesThatDoNotEnd: a case with no answer for its gate,
// one answered for another gate, and one whose input does not fit the
// flow each fail with what happened, and the others still run.
func TestRunRecordsCasesThatDoNotEnd(t *testing.T) {
	c := committed(t)
	s := triageSuite(c)
	s.Graders = s.Graders[:1]
	s.Cases = []eval.Case{
		{Name: "unanswered", Input: s.Cases[0].Input},
		{Name: "wrong-gate", Input: s.Cases[0].Input, Answers: []eval.Answer{{Gate: "approve:search", Payload: json.RawMessage(`{}`)}}},
		{Name: "bad-input", Input: json.RawMessage(`"not an incident"`)},
		{Name: "extra-answer", Input: s.Cases[0].Input, Answers: append(slices.Clone(s.Cases[0].Answers), eval.Answer{Gate: "confirm"})},
		s.Cases[0],
	}
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(c, false)}}, s)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`parked on gate "approve:checkout" and the case has no answer`, `but the case's answer 1 is for "approve:search"`,
		"did not start", `completed without reaching gate "confirm", which the case's answer 2 is for`} {
		r := rep.Cases[i]
		if r.Passed || !strings.Contains(r.Error, want) {
			t.Errorf("case %s: passed %v, error %q, want one with %q", r.Name, r.Passed, r.Error, want)
		}
	}
	if !rep.Cases[4].Passed || rep.Passed {
		t.Errorf("the answered case: %+v; suite passed %v", rep.Cases[4], rep.Passed)
	}
	bad := s
	bad.Graders = []eval.Grader{eval.Exact{}, eval.Exact{}}
	if _, err := eval.Run(context.Background(), loom.Config{}, bad); !errors.Is(err, eval.ErrInvalidSuite) {
		t.Errorf("two graders with one name ran: %v", err)
	}
}

var _ llm.Provider = scripted{}

// TestLLMJudgeReadsOnlyVerdicts: a fenced verdict is read; a score out of
// range and prose fail the grade; a case that did not complete is not
// judged (no model call).
func TestLLMJudgeReadsOnlyVerdicts(t *testing.T) {
	judge := llmtest.NewProvider(t, "scripted")
	judge.Enqueue(llmtest.Text("```json\n{\"score\": 0.6, \"reason\": \"fine\"}\n```", 10, 5),
		llmtest.Text(`{"score": 1.5, "reason": "too kind"}`, 10, 5),
		llmtest.Text("Great job!", 10, 5))
	c := committed(t)
	s := triageSuite(c)
	s.Cases = append(s.Cases[:3:3], eval.Case{Name: "unanswered", Input: s.Cases[0].Input})
	s.Graders = []eval.Grader{eval.LLMJudge{Provider: judge, Model: "judge-1", Rubric: "r"}}
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(c, false)}}, s)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"judged 0.6 (pass at 0.5): fine", "its score is missing or outside [0, 1]", "the judge's answer is not a verdict", "not judged: the case did not complete"} {
		g := rep.Cases[i].Grades[0]
		if !strings.Contains(g.Reason, want) || g.Pass != (i == 0) {
			t.Errorf("case %s: %+v, want a reason with %q", rep.Cases[i].Name, g, want)
		}
	}
	if n := len(judge.Requests()); n != 3 {
		t.Errorf("the judge was asked %d times, want 3 (never for the case that did not complete)", n)
	}
}
