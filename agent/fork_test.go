package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// unplugged is a provider that must never be called.
type unplugged struct{ t *testing.T }

func (u unplugged) Name() string { return "anthropic" }
func (u unplugged) Complete(context.Context, llm.Request, func(llm.Delta)) (llm.Response, error) {
	u.t.Error("the provider was called during a replay")
	return llm.Response{}, errors.New("unplugged")
}

// parkedAfter runs the agent with p and then parks on "done".
func parkedAfter(p llm.Provider, w *runs, model string) *loom.Flow {
	return loom.NewFlow("triage", func(ctx *loom.Context, q string) (agent.Result, error) {
		r, err := agent.Run(ctx, agent.Config{ID: "triage", Provider: p, Model: model, Tools: tools(w)}, llm.UserText(q))
		if err != nil {
			return r, err
		}
		_, err = ctx.Suspend("done")
		return r, err
	})
}

func TestARecordedRunReplaysFromItsLogWithTheProviderUnplugged(t *testing.T) {
	h := newHarness(t)
	w := newRuns()
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(10, 5, "read_logs", `{"service":"a"}`, "read_metrics", `{"service":"a"}`),
		llmtest.Calls(10, 5, "read_logs", `{"service":"b"}`), llmtest.Text("done", 10, 5))
	ctx := context.Background()
	rt := h.runtime(parkedAfter(p, w, "m"))
	id, _ := rt.Start(ctx, "triage", "q")
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = rt.Close()
	ranBefore := w.total()
	rt2 := h.runtime(parkedAfter(unplugged{t}, w, "m"))
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "done"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r := result(t, res.Output); r.Turns != 3 || r.Text != "done" || len(r.ToolCalls) != 3 {
		t.Fatalf("replayed result = %+v", r)
	}
	if w.total() != ranBefore {
		t.Fatalf("tools ran during the replay: %v", w.n)
	}
}

func TestAForkAtATurnLetsAnotherModelAnswerFromThere(t *testing.T) {
	h := newHarness(t)
	w := newRuns()
	first := llmtest.NewProvider(t, "anthropic")
	first.Enqueue(llmtest.Calls(10, 5, "read_logs", `{"service":"a"}`), llmtest.Text("it is the pool", 10, 5))
	ctx := context.Background()
	rt := h.runtime(parkedAfter(first, w, "claude-sonnet-4-5"))
	id, _ := rt.Start(ctx, "triage", "q")
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The fork point: just after turn 1's tool call completed.
	var at int64 = -1
	for _, e := range h.events(id) {
		if e.Type == event.StepCompleted && string(mustStep(t, e.Payload)) == "triage/turn:1/tool:0" {
			at = e.Sequence
		}
	}
	if at < 0 {
		t.Fatal("no completed tool call in the log")
	}
	_ = rt.Close()
	other := llmtest.NewProvider(t, "openai")
	other.Enqueue(llmtest.Text("it is the deploy", 10, 5))
	rt2 := h.runtime(parkedAfter(other, w, "gpt-4.1"))
	fork, err := rt2.Fork(ctx, id, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt2.WaitForSuspend(ctx, fork); err != nil {
		t.Fatal(err)
	}
	if err := rt2.Resume(ctx, fork, loom.ResumeEvent{EventType: "done"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, fork)
	if err != nil {
		t.Fatal(err)
	}
	if r := result(t, res.Output); r.Text != "it is the deploy" || r.Turns != 2 {
		t.Fatalf("fork result = %+v", r)
	}
	reqs := other.Requests()
	if len(reqs) != 1 || len(first.Requests()) != 2 {
		t.Fatalf("requests: other model %d (want 1), first model %d (want 2)", len(reqs), len(first.Requests()))
	}
	msgs := reqs[0].Request.Messages
	if reqs[0].Request.Model != "gpt-4.1" || len(msgs) != 3 || msgs[2].ToolResults[0].CallID != "call_0" {
		t.Fatalf("the other model saw %+v", reqs[0].Request)
	}
	if w.get("triage/turn:1/tool:0") != 1 {
		t.Fatalf("the fork ran the recorded tool again: %v", w.n)
	}
}

func mustStep(t *testing.T, payload json.RawMessage) string {
	var p struct {
		StepID string `json:"stepId"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.StepID
}

func TestASimulatedForkAsksTheModelAndSimulatesTheTools(t *testing.T) {
	h := newHarness(t)
	var real, simulated int
	act := agent.NewTool("act", "Change production.", func(context.Context, struct{}) (string, error) {
		real++
		return "changed", nil
	}, agent.Simulation(func(context.Context, struct{}) (string, error) {
		simulated++
		return "would change", nil
	}))
	p := llmtest.NewProvider(t, "anthropic")
	flow := func(p llm.Provider) *loom.Flow {
		return loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (agent.Result, error) {
			if _, err := ctx.Suspend("go"); err != nil {
				return agent.Result{}, err
			}
			return agent.Run(ctx, agent.Config{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{act}}, llm.UserText("q"))
		})
	}
	ctx := context.Background()
	rt := h.runtime(flow(p))
	id, _ := rt.Start(ctx, "f", nil)
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p.Enqueue(llmtest.Calls(1, 1, "act", `{}`), llmtest.Text("simulated", 1, 1))
	fork, err := rt.Fork(ctx, id, st.Sequence, loom.SimulateFork())
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, fork, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, fork)
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, res.Output)
	if r.Text != "simulated" || string(r.ToolCalls[0].Output) != `"would change"` || real != 0 || simulated != 1 {
		t.Fatalf("result %+v; real runs %d, simulations %d", r, real, simulated)
	}
	if len(p.Requests()) != 2 {
		t.Fatalf("model requests = %d, want 2 (a model call is read-only)", len(p.Requests()))
	}
}
