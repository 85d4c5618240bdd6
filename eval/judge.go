package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
)

// DefaultPassScore is the score an LLMJudge passes at when PassScore is 0.
const DefaultPassScore = 0.5

// judgeMaxTokens bounds the judge's answer when MaxTokens is 0.
const judgeMaxTokens = 512

// judgeStep is the step id of the judge's model call in its judging flow.
const judgeStep = "judge"

// LLMJudge asks a model to score the output at Path (a JSON Pointer; empty:
// the whole output) against Rubric, and passes when the score is at least
// PassScore (DefaultPassScore when 0).
//
// The model call is a durable step (llm.Complete) of a judging flow, id
// "eval.judge:" + Name(), which Run registers on the suite's runtime: each
// case's judgement is an execution of its own, whose log records the
// request's digest and the model's answer. The request is built from the
// rubric, the case's input, expected value and the output only, so with a
// cassette provider (llm.OpenCassette in Replay mode) every run of the
// suite is answered the same and grades the same.
//
// A case that did not complete fails without a model call. The model
// must answer one JSON object {"score": 0..1, "reason": "…"}
// (the request asks for it, with a response schema); any other answer, a
// score outside [0, 1], or a failed model call (a cassette that does not
// hold the request, say) is an error: the case's grade fails with it as
// the reason.
type LLMJudge struct {
	ID        string // the grader's name (default "llmJudge")
	Provider  llm.Provider
	Model     string
	Rubric    string
	Path      string
	PassScore float64
	// MaxTokens bounds the judge's answer (default 512).
	MaxTokens int
}

// Name implements Grader.
func (g LLMJudge) Name() string { return nameOr(g.ID, "llmJudge") }

// judgeFlowID is the id of g's judging flow.
func (g LLMJudge) judgeFlowID() string { return "eval.judge:" + g.Name() }

// judgeInput is the judging flow's input: what the judge is shown.
type judgeInput struct {
	Rubric   string          `json:"rubric"`
	Input    json.RawMessage `json:"input"`
	Expected json.RawMessage `json:"expected,omitempty"`
	Output   json.RawMessage `json:"output"`
}

// JudgeVerdict is the judge's answer, the judging flow's output.
type JudgeVerdict struct {
	Score  float64 `json:"score"`
	Reason string  `json:"reason"`
}

// verdictSchema is the response format the judge is asked to follow.
const verdictSchema = `{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1},` +
	`"reason":{"type":"string"}},"required":["score","reason"],"additionalProperties":false}`

// Flows implements FlowGrader: the judging flow.
func (g LLMJudge) Flows() []*loom.Flow {
	return []*loom.Flow{loom.NewFlow(g.judgeFlowID(), func(ctx *loom.Context, in judgeInput) (JudgeVerdict, error) {
		if g.Provider == nil {
			return JudgeVerdict{}, fmt.Errorf("eval: judge %s has no provider", g.Name())
		}
		resp, err := llm.Complete(ctx, judgeStep, g.Provider, g.request(in))
		if err != nil {
			return JudgeVerdict{}, err
		}
		return parseVerdict(resp.Text)
	})}
}

// request is the model call judging in: deterministic in its input.
func (g LLMJudge) request(in judgeInput) llm.Request {
	zero := 0.0
	var b strings.Builder
	fmt.Fprintf(&b, "Rubric:\n%s\n\nInput (JSON):\n%s\n", in.Rubric, in.Input)
	if len(in.Expected) > 0 {
		fmt.Fprintf(&b, "\nExpected output (JSON):\n%s\n", in.Expected)
	}
	fmt.Fprintf(&b, "\nOutput to grade (JSON):\n%s\n", in.Output)
	return llm.Request{
		Model: g.Model,
		System: "You grade the output of a program against a rubric. Answer with one JSON object and nothing else: " +
			`{"score": <a number from 0 (fails the rubric) to 1 (meets it fully)>, "reason": "<one sentence>"}.`,
		Messages:       []llm.Message{llm.UserText(b.String())},
		MaxTokens:      cmpOr(g.MaxTokens, judgeMaxTokens),
		Temperature:    &zero,
		ResponseFormat: &llm.ResponseFormat{Name: "verdict", Schema: json.RawMessage(verdictSchema)},
	}
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// errNotAVerdict is a judge answer that is not {"score", "reason"}.
var errNotAVerdict = errors.New("eval: the judge's answer is not a verdict")

// parseVerdict reads the judge's answer: one JSON object, optionally in a
// ```json fence, with a score in [0, 1] and a reason.
func parseVerdict(answer string) (JudgeVerdict, error) {
	s := strings.TrimSpace(answer)
	s = strings.TrimPrefix(s, "```json")
	s = strings.TrimPrefix(s, "```")
	s = strings.TrimSpace(strings.TrimSuffix(s, "```"))
	var p struct {
		Score  *float64 `json:"score"`
		Reason string   `json:"reason"`
	}
	if err := event.UnmarshalExact([]byte(s), &p); err != nil {
		return JudgeVerdict{}, fmt.Errorf("%w: want {\"score\": 0..1, \"reason\": \"…\"}, got %q", errNotAVerdict, clip(answer, maxReasonBytes))
	}
	if p.Score == nil || math.IsNaN(*p.Score) || *p.Score < 0 || *p.Score > 1 {
		return JudgeVerdict{}, fmt.Errorf("%w: its score is missing or outside [0, 1]", errNotAVerdict)
	}
	return JudgeVerdict{Score: *p.Score, Reason: p.Reason}, nil
}

// Grade implements Grader: it runs the judging flow for s, under the
// execution id s.ExecutionID + "/judge:" + Name(), and waits for its verdict.
func (g LLMJudge) Grade(ctx context.Context, s Subject) (Grade, error) {
	if s.Runtime == nil {
		return Grade{}, fmt.Errorf("eval: judge %s needs the suite's runtime (run it through eval.Run)", g.Name())
	}
	if s.Status != fold.StatusCompleted {
		return verdict(false, "not judged: the case did not complete ("+clip(s.Error, maxReasonBytes)+")"), nil
	}
	out, err := lookup(s.Output, g.Path)
	if err != nil {
		return verdict(false, "the output has nothing at "+g.Path), nil
	}
	in := judgeInput{Rubric: g.Rubric, Input: canonical(s.Case.Input), Output: canonical(out)}
	if len(s.Case.Expected) > 0 {
		if want, err := lookup(s.Case.Expected, g.Path); err == nil {
			in.Expected = canonical(want)
		}
	}
	id := s.ExecutionID + "/judge:" + g.Name()
	if _, err := s.Runtime.Start(ctx, g.judgeFlowID(), in, loom.WithExecutionID(id)); err != nil {
		return Grade{}, fmt.Errorf("eval: judge %s: %w", g.Name(), err)
	}
	res, err := s.Runtime.WaitForCompletion(ctx, id)
	costs := costsOf(res.State)
	if err != nil {
		return Grade{Costs: &costs}, fmt.Errorf("eval: judge %s: %w", g.Name(), err)
	}
	var v JudgeVerdict
	if err := json.Unmarshal(res.Output, &v); err != nil {
		return Grade{Costs: &costs}, fmt.Errorf("eval: judge %s: reading its verdict: %w", g.Name(), err)
	}
	pass := g.PassScore
	if pass == 0 {
		pass = DefaultPassScore
	}
	reason := fmt.Sprintf("judged %s (pass at %s): %s", formatScore(v.Score), formatScore(pass), clip(v.Reason, 2*maxReasonBytes))
	return Grade{Score: v.Score, Pass: v.Score >= pass, Reason: reason, Costs: &costs}, nil
}

// formatScore renders a score as JavaScript would, so reports read alike.
func formatScore(f float64) string { return event.FormatJSNumber(f) }
