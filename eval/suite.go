package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// Limits of a suite, checked by Run (and ParseSuiteFile) before anything
// runs.
const (
	// MaxCases bounds the cases of a suite.
	MaxCases = 10_000
	// MaxGraders bounds the graders of a suite.
	MaxGraders = 64
	// MaxAnswers bounds the gate answers of one case, and so the parks
	// Run answers in one execution.
	MaxAnswers = 256
)

// Suite is a flow and the cases to run it over, with the graders every
// case's outcome is scored by.
type Suite struct {
	// Name names the suite in reports and in the execution ids of its
	// cases ("eval." + Name + "." + case name).
	Name string
	// Flow is the id of the flow every case runs.
	Flow    string
	Cases   []Case
	Graders []Grader
	// Thresholds are what `eval run --baseline` compares with (see
	// Compare); Run itself does not read them.
	Thresholds Thresholds
}

// Case is one input to run the suite's flow on, the answers to give at the
// gates it parks on, and the value graders such as Exact expect.
type Case struct {
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Answers  []Answer        `json:"answers,omitempty"`
	Expected json.RawMessage `json:"expected,omitempty"`
}

// Answer is what to answer a gate with. Answers are given in order: when
// the run parks, the next unused answer must be for that gate — Gate is
// the gate's name, or a family ending in "*" ("approve.deploy:*" answers
// every gate with that prefix, such as an agent's per-call approvals).
type Answer struct {
	Gate    string          `json:"gate"`
	Payload json.RawMessage `json:"payload"`
}

// matches reports whether a answers gate.
func (a Answer) matches(gate string) bool {
	if prefix, family := strings.CutSuffix(a.Gate, "*"); family {
		return strings.HasPrefix(gate, prefix)
	}
	return a.Gate == gate
}

// Report is the outcome of a suite run: every case's result in suite
// order, a summary per grader in suite order, and the totals. It holds no
// timestamps or durations, so the same code and the same recorded model
// answers give the same report, byte for byte.
type Report struct {
	Suite   string          `json:"suite"`
	Flow    string          `json:"flow"`
	Passed  bool            `json:"passed"`
	Cases   []CaseResult    `json:"cases"`
	Graders []GraderSummary `json:"graders"`
	// Costs is the cases' total; JudgeCosts the graders' (the LLM judge).
	Costs      Costs `json:"costs"`
	JudgeCosts Costs `json:"judgeCosts"`
}

// CaseResult is one case's execution and its grades. Passed says the case
// completed with every answer used (Error empty) and every grade passed.
type CaseResult struct {
	Name        string          `json:"name"`
	ExecutionID string          `json:"executionId"`
	Status      fold.Status     `json:"status"`
	Output      json.RawMessage `json:"output"`
	Error       string          `json:"error,omitempty"`
	Passed      bool            `json:"passed"`
	Grades      []Grade         `json:"grades"`
	Costs       Costs           `json:"costs"`
	// Log is the execution's log as the store holds it, for DiffRuns; it
	// is not part of the report file.
	Log []event.Envelope `json:"-"`
}

// GraderSummary is one grader over every case.
type GraderSummary struct {
	Grader    string  `json:"grader"`
	Cases     int     `json:"cases"`
	Passed    int     `json:"passed"`
	PassRate  float64 `json:"passRate"`
	MeanScore float64 `json:"meanScore"`
}

// ErrInvalidSuite matches every refusal of Suite.Validate.
var ErrInvalidSuite = errors.New("eval: invalid suite")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSuite, fmt.Sprintf(format, args...))
}

// Validate refuses a suite Run cannot run: no name or flow, no cases or
// graders, more than the limits allow, two cases or two graders with one
// name, a case input or answer that is not JSON, an answer with no gate.
// Every refusal matches ErrInvalidSuite and names what to fix.
func (s Suite) Validate() error {
	switch {
	case s.Name == "" || event.ValidateID("suite name", s.Name) != nil:
		return invalid("the suite needs a name (a printable id)")
	case s.Flow == "":
		return invalid("suite %s names no flow to run", s.Name)
	case len(s.Cases) == 0:
		return invalid("suite %s has no cases", s.Name)
	case len(s.Cases) > MaxCases:
		return invalid("suite %s has %d cases, at most %d are allowed: split it", s.Name, len(s.Cases), MaxCases)
	case len(s.Graders) == 0:
		return invalid("suite %s has no graders: nothing would judge its cases", s.Name)
	case len(s.Graders) > MaxGraders:
		return invalid("suite %s has %d graders, at most %d are allowed", s.Name, len(s.Graders), MaxGraders)
	}
	names := map[string]bool{}
	for i, c := range s.Cases {
		if err := c.validate(); err != nil {
			return invalid("case %d: %v", i+1, err)
		}
		if names[c.Name] {
			return invalid("two cases are named %q: case names must be unique", c.Name)
		}
		names[c.Name] = true
	}
	graders := map[string]bool{}
	for i, g := range s.Graders {
		if g == nil {
			return invalid("grader %d is nil", i+1)
		}
		if graders[g.Name()] {
			return invalid("two graders are named %q: give one an id", g.Name())
		}
		graders[g.Name()] = true
	}
	return nil
}

func (c Case) validate() error {
	switch {
	case c.Name == "" || event.ValidateID("case name", c.Name) != nil:
		return errors.New("a case needs a name (a printable id)")
	case len(c.Input) > 0 && !json.Valid(c.Input):
		return fmt.Errorf("case %s: the input is not JSON", c.Name)
	case len(c.Expected) > 0 && !json.Valid(c.Expected):
		return fmt.Errorf("case %s: the expected value is not JSON", c.Name)
	case len(c.Answers) > MaxAnswers:
		return fmt.Errorf("case %s has %d answers, at most %d are allowed", c.Name, len(c.Answers), MaxAnswers)
	}
	for i, a := range c.Answers {
		if a.Gate == "" {
			return fmt.Errorf("case %s: answer %d names no gate", c.Name, i+1)
		}
		if len(a.Payload) > 0 && !json.Valid(a.Payload) {
			return fmt.Errorf("case %s: the answer to %s is not JSON", c.Name, a.Gate)
		}
	}
	return nil
}

// Run runs every case of s, in order, as a real execution on a Runtime
// built from cfg plus the graders' own flows (FlowGrader), and closed
// before Run returns. cfg must register s.Flow; without Storage or Events
// the runtime runs on memory stores (store/memstore), which is what a
// suite wants: each Run starts from empty logs, so its execution ids
// ("eval." + suite + "." + case) never collide. Over a persistent store
// a second Run of the same suite is refused case by case
// (loom.ErrExecutionExists) — use a fresh store.
//
// Each case is started with its input; whenever it parks, the next answer
// (which must match the gate) resumes it; once it ends, or parks on a gate
// it has no answer for, every grader grades it. A case that cannot start,
// fails, stays parked, or completes without reaching a gate it answers
// keeps its Status and Error in its CaseResult and does not pass. Run returns an error only for an invalid suite, a
// runtime that cannot be built, or ctx ending.
func Run(ctx context.Context, cfg loom.Config, s Suite) (Report, error) {
	if err := s.Validate(); err != nil {
		return Report{}, err
	}
	if cfg.Storage == nil && cfg.Events == nil {
		cfg.Storage = memstore.NewSet()
	}
	cfg.Flows = append([]*loom.Flow(nil), cfg.Flows...)
	for _, g := range s.Graders {
		if fg, ok := g.(FlowGrader); ok {
			cfg.Flows = append(cfg.Flows, fg.Flows()...)
		}
	}
	events := cfg.Events
	if events == nil {
		events = cfg.Storage.StoreSet().Events
	}
	rt, err := loom.New(cfg)
	if err != nil {
		return Report{}, fmt.Errorf("eval: building the suite's runtime: %w", err)
	}
	defer rt.Close()
	rep := Report{Suite: s.Name, Flow: s.Flow, Passed: true, Cases: make([]CaseResult, 0, len(s.Cases))}
	for _, c := range s.Cases {
		res, err := runCase(ctx, rt, events, s, c)
		if err != nil {
			return Report{}, err
		}
		rep.Passed = rep.Passed && res.Passed
		rep.Costs = rep.Costs.add(res.Costs)
		for _, g := range res.Grades {
			if g.Costs != nil {
				rep.JudgeCosts = rep.JudgeCosts.add(*g.Costs)
			}
		}
		rep.Cases = append(rep.Cases, res)
	}
	rep.Graders = summarize(s.Graders, rep.Cases)
	return rep, nil
}

// caseExecutionID is the execution id case c of suite s runs under.
func caseExecutionID(s Suite, c Case) string { return "eval." + s.Name + "." + c.Name }

// runCase drives one case to its end (or an unanswerable park) and grades
// it. Only ctx ending is an error.
func runCase(ctx context.Context, rt *loom.Runtime, events store.EventStore, s Suite, c Case) (CaseResult, error) {
	res := CaseResult{Name: c.Name, ExecutionID: caseExecutionID(s, c), Output: json.RawMessage("null")}
	st, used, runErr := playCase(ctx, rt, res.ExecutionID, s.Flow, c)
	if err := ctx.Err(); err != nil {
		return CaseResult{}, err
	}
	res.Status = st.Status
	res.Costs = costsOf(st)
	switch {
	case runErr != nil:
		res.Error = runErr.Error()
	case st.Status == fold.StatusCompleted:
		res.Output = canonical(st.Variables.Output)
		if used < len(c.Answers) {
			// A gate the case answers was never reached: the flow skipped
			// an approval, say. The output is graded; the case fails.
			res.Error = fmt.Sprintf("the execution completed without reaching gate %q, which the case's answer %d is for", c.Answers[used].Gate, used+1)
		}
	default:
		res.Error = "the execution ended " + string(st.Status) + ": " + errorText(st.Variables.Error)
	}
	if log, err := store.Read(ctx, events, res.ExecutionID); err == nil {
		res.Log = log
	}
	sub := Subject{Case: c, ExecutionID: res.ExecutionID, Status: res.Status, Output: res.Output, Error: res.Error, Runtime: rt}
	res.Passed = res.Status == fold.StatusCompleted && res.Error == ""
	for _, g := range s.Graders {
		gr, err := g.Grade(ctx, sub)
		if cerr := ctx.Err(); cerr != nil {
			return CaseResult{}, cerr
		}
		if err != nil {
			gr = Grade{Score: 0, Pass: false, Reason: "could not grade: " + err.Error(), Costs: gr.Costs}
		}
		gr.Grader = g.Name()
		gr.Score = min(max(gr.Score, 0), 1)
		res.Passed = res.Passed && gr.Pass
		res.Grades = append(res.Grades, gr)
	}
	return res, nil
}

// playCase starts case c under id and answers its parks until it ends,
// or parks on a gate the case has no answer for (an error saying so). It
// returns the state reached and how many answers it gave.
func playCase(ctx context.Context, rt *loom.Runtime, id, flow string, c Case) (fold.State, int, error) {
	if _, err := rt.Start(ctx, flow, orNull(c.Input), loom.WithExecutionID(id)); err != nil {
		return fold.State{Status: fold.StatusPending}, 0, fmt.Errorf("the case did not start: %w", err)
	}
	next := 0
	for {
		st, err := rt.WaitForSettled(ctx, id)
		if err != nil || st.Status.Terminal() {
			return st, next, err
		}
		gate := ""
		if st.Variables.SuspendedOn != nil {
			gate = st.Variables.SuspendedOn.On
		}
		if next >= len(c.Answers) {
			return st, next, fmt.Errorf("the execution parked on gate %q and the case has no answer left for it", gate)
		}
		a := c.Answers[next]
		if !a.matches(gate) {
			return st, next, fmt.Errorf("the execution parked on gate %q but the case's answer %d is for %q", gate, next+1, a.Gate)
		}
		next++
		if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: orNull(a.Payload)}); err != nil {
			return st, next, fmt.Errorf("answering gate %q: %w", gate, err)
		}
	}
}

// orNull is raw, or JSON null for an absent value.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// errorText is a recorded error's message.
func errorText(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	if len(raw) == 0 {
		return "no error recorded"
	}
	return string(canonical(raw))
}

// summarize is each grader's pass count, pass rate and mean score.
func summarize(graders []Grader, cases []CaseResult) []GraderSummary {
	out := make([]GraderSummary, 0, len(graders))
	for i, g := range graders {
		sum := GraderSummary{Grader: g.Name(), Cases: len(cases)}
		total := 0.0
		for _, c := range cases {
			if c.Grades[i].Pass {
				sum.Passed++
			}
			total += c.Grades[i].Score
		}
		if len(cases) > 0 {
			sum.PassRate = float64(sum.Passed) / float64(len(cases))
			sum.MeanScore = total / float64(len(cases))
		}
		out = append(out, sum)
	}
	return out
}
