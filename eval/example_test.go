package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// greetFlow greets a name in the tone a recorded decision picks, once the
// "confirm" gate says so.
func greetFlow() *loom.Flow {
	greet := loom.NewStep("greet", func(_ context.Context, name string) (string, error) { return "hello " + name, nil })
	return loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		msg, err := loom.Run(ctx, greet, name)
		if err != nil {
			return "", err
		}
		tone, err := loom.Decide(ctx, "tone", func() (string, error) {
			if strings.HasPrefix(name, "Dr") {
				return "formal", nil
			}
			return "casual", nil
		})
		if err != nil {
			return "", err
		}
		ok, err := loom.Suspend[bool](ctx, "confirm")
		if err != nil || !ok {
			return "", err
		}
		return msg + " (" + tone + ")", nil
	})
}

// recordGreeting runs greetFlow for name on a fresh store, answers its
// gate, and returns the log as a store holds it.
func recordGreeting(name string) []event.Envelope {
	ctx := context.Background()
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{greetFlow()}})
	defer rt.Close()
	id, _ := rt.Start(ctx, "greet", name, loom.WithExecutionID("greet-"+name))
	_, _ = rt.WaitForSuspend(ctx, id)
	_ = rt.Resume(ctx, id, loom.ResumeEvent{EventType: "confirm", Payload: json.RawMessage("true")})
	_, _ = rt.WaitForCompletion(ctx, id)
	log, _ := store.Read(ctx, events, id)
	return log
}

// A recorded execution becomes a case: its input, its gate answers and
// its output as the expected value.
func ExampleCaseFromLog() {
	c, err := eval.CaseFromLog(recordGreeting("ada"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Name, string(c.Input), c.Answers[0].Gate, string(c.Answers[0].Payload), string(c.Expected))
	// Output: greet-ada "ada" confirm true "hello ada (casual)"
}

// Recorded executions become a suite graded by Exact: it passes while the
// code reproduces every recorded output.
func ExampleSuiteFromLogs() {
	s, _ := eval.SuiteFromLogs("greetings", recordGreeting("ada"), recordGreeting("Dr Who"))
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{greetFlow()}}, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range rep.Cases {
		fmt.Println(c.Name, c.Passed, c.Grades[0].Reason)
	}
	// Output:
	// greet-ada true the output equals the expected value
	// greet-Dr Who true the output equals the expected value
}

// DiffRuns compares two executions by what they did: step outputs,
// decisions, gates and answers, the output and the costs.
func ExampleDiffRuns() {
	fmt.Print(eval.DiffRuns(recordGreeting("ada"), recordGreeting("Dr Who")))
	// Output:
	// execution:
	//   ~ execution.output: "hello ada (casual)" -> "hello Dr Who (formal)"
	// steps:
	//   ~ greet.output: "hello ada" -> "hello Dr Who"
	// decisions:
	//   ~ tone.choice: "casual" -> "formal"
}

// Run runs each case as a real execution, answers its gates, and grades
// its output; here with a regex and a JSON Schema.
func ExampleRun() {
	s := eval.Suite{Name: "greet", Flow: "greet",
		Cases: []eval.Case{
			{Name: "ada", Input: json.RawMessage(`"ada"`), Answers: []eval.Answer{{Gate: "confirm", Payload: json.RawMessage("true")}}},
			{Name: "unconfirmed", Input: json.RawMessage(`"bob"`), Answers: []eval.Answer{{Gate: "confirm", Payload: json.RawMessage("false")}}},
		},
		Graders: []eval.Grader{
			eval.Regex{Pattern: `^hello \w+ \((casual|formal)\)$`},
			eval.JSONSchema{Schema: json.RawMessage(`{"type": "string", "minLength": 1}`)},
		}}
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{greetFlow()}}, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range rep.Cases {
		fmt.Printf("%s passed=%v: %s; %s\n", c.Name, c.Passed, c.Grades[0].Reason, c.Grades[1].Reason)
	}
	fmt.Printf("regex pass rate %v\n", rep.Graders[0].PassRate)
	// Output:
	// ada passed=true: the output matches ^hello \w+ \((casual|formal)\)$; the output satisfies the schema
	// unconfirmed passed=false: the output ("") does not match ^hello \w+ \((casual|formal)\)$; the output fails the schema: at /: minLength: got 0, want 1
	// regex pass rate 0.5
}

// Exact compares the output, or a part of it, with the case's expected
// value as JSON.
func ExampleExact() {
	sub := eval.Subject{Case: eval.Case{Expected: json.RawMessage(`{"plan": {"fix": "rollback"}, "id": 7}`)},
		Output: json.RawMessage(`{"id": 8, "plan": {"fix": "rollback"}}`)}
	whole, _ := eval.Exact{}.Grade(context.Background(), sub)
	part, _ := eval.Exact{Path: "/plan"}.Grade(context.Background(), sub)
	fmt.Println(whole.Pass, whole.Reason)
	fmt.Println(part.Pass, part.Reason)
	// Output:
	// false the output is {"id":8,"plan":{"fix":"rollback"}}, expected {"id":7,"plan":{"fix":"rollback"}}
	// true the output at /plan equals the expected value
}

// LLMJudge asks a model for a score against a rubric; its call is a
// durable step of a judging execution (a cassette makes it replayable).
func ExampleLLMJudge() {
	model := llmtest.NewProvider(nil, "scripted")
	model.Enqueue(llmtest.Text(`{"score": 0.8, "reason": "friendly and names the person"}`, 90, 12))
	s := eval.Suite{Name: "tone", Flow: "greet",
		Cases:   []eval.Case{{Name: "ada", Input: json.RawMessage(`"ada"`), Answers: []eval.Answer{{Gate: "confirm", Payload: json.RawMessage("true")}}}},
		Graders: []eval.Grader{eval.LLMJudge{Provider: model, Model: "judge-1", Rubric: "A greeting must be friendly.", PassScore: 0.7}}}
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{greetFlow()}}, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	g := rep.Cases[0].Grades[0]
	fmt.Println(g.Grader, g.Pass, g.Score, g.Reason)
	fmt.Println("judge tokens:", rep.JudgeCosts.Tokens)
	// Output:
	// llmJudge true 0.8 judged 0.8 (pass at 0.7): friendly and names the person
	// judge tokens: 102
}

// Compare flags what got worse beyond the thresholds.
func ExampleCompare() {
	report := func(pass bool, score, cost float64) eval.Report {
		return eval.Report{Suite: "s", Passed: pass,
			Cases:   []eval.CaseResult{{Name: "c1", Passed: pass, Grades: []eval.Grade{{Grader: "judge", Score: score, Pass: pass, Reason: map[bool]string{false: "too curt"}[pass]}}}},
			Graders: []eval.GraderSummary{{Grader: "judge", Cases: 1, Passed: map[bool]int{true: 1}[pass], PassRate: map[bool]float64{true: 1}[pass], MeanScore: score}},
			Costs:   eval.Costs{ModelCalls: 1, Tokens: 100, CostUSD: cost}}
	}
	cmp := eval.Compare(report(true, 0.9, 0.010), report(false, 0.3, 0.011), eval.Thresholds{MeanScoreDrop: 0.1, CostIncrease: 0.2})
	fmt.Print(cmp)
	fmt.Println("regressed:", cmp.Regressed())
	// Output:
	// 3 regression(s): 1/1 cases passed in the baseline, 0/1 in the candidate
	//   REGRESSION case c1 judge: passed, now fails: too curt
	//   REGRESSION grader judge: pass rate dropped from 100% to 0% (threshold 0%)
	//   REGRESSION grader judge: mean score dropped from 0.9 to 0.3 (threshold 0.1)
	// regressed: true
}

// ParseSuiteFile reads the JSON suite format strictly: an unknown member
// is refused with the member's path and what to do.
func ExampleParseSuiteFile() {
	src := `{"format": "loom-eval-suite/1", "name": "greet", "flow": "greet",
	  "cases": [{"name": "ada", "input": "ada", "answer": [{"gate": "confirm", "payload": true}]}],
	  "graders": [{"type": "regex", "pattern": "^hello"}]}`
	_, err := eval.ParseSuiteFile("greet.suite.json", []byte(src), eval.SuiteFileOptions{})
	fmt.Println(err)
	fixed := strings.Replace(src, `"answer"`, `"answers"`, 1)
	s, err := eval.ParseSuiteFile("greet.suite.json", []byte(fixed), eval.SuiteFileOptions{})
	fmt.Println(err, s.Name, len(s.Cases), s.Graders[0].Name())
	// Output:
	// eval: suite file greet.suite.json: member cases[0].answer is unknown; the members allowed here are name, input, answers, expected, log: remove it or fix its spelling
	// <nil> greet 1 regex
}

// RunMain is the eval command an app embeds (Main wraps it with os.Args
// and os.Exit): it runs a suite file and writes report.json and report.md.
func ExampleRunMain() {
	dir, _ := os.MkdirTemp("", "eval-example")
	defer os.RemoveAll(dir)
	suite := dir + "/greet.suite.json"
	_ = os.WriteFile(suite, []byte(`{"format": "loom-eval-suite/1", "name": "greet", "flow": "greet",
	  "cases": [{"name": "ada", "input": "ada", "answers": [{"gate": "confirm", "payload": true}], "expected": "hello ada (casual)"}],
	  "graders": [{"type": "exact"}]}`), 0o644)
	app := eval.App{Flows: []*loom.Flow{greetFlow()}}
	var out strings.Builder
	code := eval.RunMain(context.Background(), app, []string{"run", "--suite", suite, "--out", dir + "/report"}, &out, os.Stderr)
	fmt.Println(code, strings.ReplaceAll(out.String(), dir, "DIR"))
	// Output:
	// 0 suite greet: 1/1 cases passed
	// wrote DIR/report/report.json, DIR/report/report.md
}
