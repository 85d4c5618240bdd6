package eval_test

// The triage flow of these tests stands in for examples/incident, which is
// a command (package main) and exports nothing: the same shape, smaller —
// collect the service's signals (a step), decide the severity (a recorded
// decision), ask the planner model for a fix (llm.Complete, a durable
// model call), park on the approval gate, then apply the fix or escalate.
// Its model calls, and the LLM judge's, are served by the committed
// cassette testdata/cassette.json, recorded from llmtest's scripted
// provider (TestCommittedCassetteIsTheRecording re-records it and checks
// the bytes; go test ./eval/ -run Committed -record rewrites it).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

var record = flag.Bool("record", false, "re-record testdata/cassette.json from the scripted provider")

const (
	triageFlowID = "triage"
	// model is priced in llm.DefaultPrices, so every call meters a cost.
	model       = "claude-haiku-4-5"
	cassetteRel = "testdata/cassette.json"
)

type incident struct {
	Service string `json:"service"`
	Symptom string `json:"symptom"`
}

type signals struct {
	Service string `json:"service"`
	P99Ms   int    `json:"p99Ms"`
	OOMs    int    `json:"ooms"`
}

type approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

type summary struct {
	Service   string `json:"service"`
	Severity  string `json:"severity"`
	Fix       string `json:"fix"`
	Outcome   string `json:"outcome"`
	DecidedBy string `json:"decidedBy"`
}

// signalsOf is what the collect step reads for an incident: a pure
// function of its symptom.
func signalsOf(in incident) signals {
	s := signals{Service: in.Service, P99Ms: 180}
	if strings.Contains(in.Symptom, "latency") {
		s.P99Ms = 2300
	}
	if strings.Contains(in.Symptom, "memory") {
		s.OOMs = 3
	}
	return s
}

// triageFlow is the flow; regressed is the candidate with two bugs: it
// asks the model to review its plan (a second model call: more cost) and
// escalates even an approved fix.
func triageFlow(p llm.Provider, regressed bool) *loom.Flow {
	collect := loom.NewStep("collect-signals", func(_ context.Context, in incident) (signals, error) { return signalsOf(in), nil })
	apply := loom.NewStep("apply-fix", func(_ context.Context, fix string) (string, error) { return "applied " + fix, nil })
	return loom.NewFlow(triageFlowID, func(ctx *loom.Context, in incident) (summary, error) {
		sig, err := loom.Run(ctx, collect, in)
		if err != nil {
			return summary{}, err
		}
		sev, err := loom.Decide(ctx, "severity", func() (string, error) {
			if sig.P99Ms > 2000 || sig.OOMs > 0 {
				return "high", nil
			}
			return "low", nil
		})
		if err != nil {
			return summary{}, err
		}
		req := llm.Request{Model: model, System: "You plan incident fixes. Answer {\"fix\": \"rollback\"|\"restart\"|\"scale-out\"}.",
			Messages: []llm.Message{llm.UserText(fmt.Sprintf("service %s: %s (p99 %d ms, %d OOM kills)", sig.Service, in.Symptom, sig.P99Ms, sig.OOMs))}}
		resp, err := llm.Complete(ctx, "plan", p, req)
		if err != nil {
			return summary{}, err
		}
		if regressed {
			review := req
			review.Messages = append(append([]llm.Message(nil), req.Messages...), resp.Message(), llm.UserText("Review your plan."))
			if _, err := llm.Complete(ctx, "plan-review", p, review); err != nil {
				return summary{}, err
			}
		}
		var plan struct {
			Fix string `json:"fix"`
		}
		if err := json.Unmarshal([]byte(resp.Text), &plan); err != nil {
			return summary{}, fmt.Errorf("the planner's answer is not a plan: %w", err)
		}
		out := summary{Service: in.Service, Severity: sev, Fix: plan.Fix}
		ans, err := loom.Suspend[approval](ctx, "approve:"+in.Service)
		if err != nil {
			return summary{}, err
		}
		out.DecidedBy = ans.By
		if !ans.Approved || regressed {
			out.Outcome = "escalated"
			return out, nil
		}
		if _, err := loom.Run(ctx, apply, plan.Fix); err != nil {
			return summary{}, err
		}
		out.Outcome = "fixed"
		return out, nil
	})
}

// scripted answers each request as a pure function of it, through
// llmtest's scripted provider (which records every request it gets).
type scripted struct{ *llmtest.Provider }

func newScripted(t testing.TB) scripted { return scripted{llmtest.NewProvider(t, "anthropic")} }

func (s scripted) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	s.Enqueue(answer(req))
	return s.Provider.Complete(ctx, req, sink)
}

// answer is the scripted model: a planner that picks the fix the symptom
// calls for, a reviewer that agrees, and a judge that scores "fixed" high
// and "escalated" low.
func answer(req llm.Request) llmtest.Reply {
	last := req.Messages[len(req.Messages)-1].Text
	switch {
	case req.ResponseFormat != nil && req.ResponseFormat.Name == "verdict":
		cut := strings.Index(last, "Output to grade")
		want, got := outcomeRE.FindStringSubmatch(last[:cut]), outcomeRE.FindStringSubmatch(last[cut:])
		if want != nil && got != nil && want[1] == got[1] {
			return llmtest.Text(`{"score": 0.9, "reason": "the outcome is the one the rubric asks for"}`, 220, 18)
		}
		return llmtest.Text(`{"score": 0.1, "reason": "the outcome is not the one the rubric asks for"}`, 220, 18)
	case last == "Review your plan.":
		return llmtest.Text("The plan stands.", 140, 6)
	case strings.Contains(last, "memory"):
		return llmtest.Text(`{"fix": "restart"}`, 120, 8)
	case strings.Contains(last, "latency"):
		return llmtest.Text(`{"fix": "rollback"}`, 120, 8)
	}
	return llmtest.Text(`{"fix": "scale-out"}`, 120, 8)
}

var outcomeRE = regexp.MustCompile(`"outcome":"([a-z-]+)"`)

// triageCases are the suite's cases: three approved fixes and a rejection.
func triageCases() []eval.Case {
	approve := func(by string, ok bool) []eval.Answer {
		return []eval.Answer{{Gate: "approve:*", Payload: json.RawMessage(fmt.Sprintf(`{"approved": %t, "by": %q}`, ok, by))}}
	}
	return []eval.Case{
		{Name: "latency", Input: json.RawMessage(`{"service": "checkout", "symptom": "p99 latency above 2s"}`), Answers: approve("ann", true),
			Expected: json.RawMessage(`{"service":"checkout","severity":"high","fix":"rollback","outcome":"fixed","decidedBy":"ann"}`)},
		{Name: "memory", Input: json.RawMessage(`{"service": "search", "symptom": "memory climbing, pods OOM-killed"}`), Answers: approve("bob", true),
			Expected: json.RawMessage(`{"service":"search","severity":"high","fix":"restart","outcome":"fixed","decidedBy":"bob"}`)},
		{Name: "errors", Input: json.RawMessage(`{"service": "checkout", "symptom": "error rate up"}`), Answers: approve("dan", true),
			Expected: json.RawMessage(`{"service":"checkout","severity":"low","fix":"scale-out","outcome":"fixed","decidedBy":"dan"}`)},
		{Name: "rejected", Input: json.RawMessage(`{"service": "checkout", "symptom": "p99 latency above 2s"}`), Answers: approve("cy", false),
			Expected: json.RawMessage(`{"service":"checkout","severity":"high","fix":"rollback","outcome":"escalated","decidedBy":"cy"}`)},
	}
}

// triageSuite grades with every built-in grader; judge is the LLM judge's
// provider.
func triageSuite(judge llm.Provider) eval.Suite {
	return eval.Suite{Name: "triage", Flow: triageFlowID, Cases: triageCases(), Graders: []eval.Grader{
		eval.Exact{ID: "same-outcome", Path: "/outcome"},
		eval.Regex{ID: "known-fix", Path: "/fix", Pattern: "^(rollback|restart|scale-out)$"},
		eval.JSONSchema{ID: "shape", Schema: json.RawMessage(`{"type":"object","required":["service","fix","outcome"],
			"properties":{"outcome":{"enum":["fixed","escalated"]}}}`)},
		eval.LLMJudge{ID: "judge", Provider: judge, Model: model, PassScore: 0.5,
			Rubric: "An approved fix must be applied (outcome fixed); a rejected one escalated."},
	}}
}

// runTriage runs the triage suite on the flow (regressed or not), with
// every model call answered by p.
func runTriage(t testing.TB, p llm.Provider, regressed bool) eval.Report {
	t.Helper()
	rep, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(p, regressed)}}, triageSuite(p))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// committed is the committed cassette, replayed.
func committed(t testing.TB) *llm.Cassette {
	t.Helper()
	c, err := llm.OpenCassette(cassetteRel, llm.CassetteOptions{Mode: llm.Replay})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recordCassette records the scripted model's answers to every request
// the baseline and the regressed suite make into the cassette at path.
func recordCassette(t *testing.T, path string) {
	t.Helper()
	c, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: newScripted(t)})
	if err != nil {
		t.Fatal(err)
	}
	runTriage(t, c, false)
	runTriage(t, c, true)
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
}

// TestCommittedCassetteIsTheRecording re-records the cassette from the
// scripted provider and checks it is the committed file, byte for byte.
func TestCommittedCassetteIsTheRecording(t *testing.T) {
	if *record {
		_ = os.Remove(cassetteRel)
		recordCassette(t, cassetteRel)
	}
	fresh := filepath.Join(t.TempDir(), "cassette.json")
	recordCassette(t, fresh)
	got, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(cassetteRel)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the committed %s is not what the scripted provider records; re-record it with go test ./eval/ -run Committed -record", cassetteRel)
	}
}
