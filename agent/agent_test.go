package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// runs counts tool invocations by step id: the outside world, which
// outlives a runtime.
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func newRuns() *runs { return &runs{n: map[string]int{}} }

func (r *runs) add(ctx context.Context) {
	ec := loom.EffectContext(ctx)
	r.mu.Lock()
	r.n[ec.StepID]++
	r.mu.Unlock()
}

func (r *runs) get(step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[step]
}

func (r *runs) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := 0
	for _, v := range r.n { //loom:order-independent a sum
		t += v
	}
	return t
}

type svc struct {
	Service string `json:"service"`
}

type fix struct {
	Service string `json:"service"`
	Action  string `json:"action" jsonschema:"enum=rollback,enum=restart"`
}

// tools is the triage agent's tool set, counting into w.
func tools(w *runs) []*agent.Tool {
	return []*agent.Tool{
		agent.NewTool("read_logs", "Read a service's logs.", func(ctx context.Context, in svc) (map[string]any, error) {
			w.add(ctx)
			return map[string]any{"service": in.Service, "lines": []string{"pool exhausted"}}, nil
		}, agent.ReadOnly()),
		agent.NewTool("read_metrics", "Read a service's metrics.", func(ctx context.Context, in svc) (map[string]any, error) {
			w.add(ctx)
			if in.Service == "broken" {
				return nil, errors.New("metrics backend timed out")
			}
			return map[string]any{"service": in.Service, "p99Ms": 2400}, nil
		}, agent.ReadOnly()),
		agent.NewTool("apply_fix", "Apply a fix.", func(ctx context.Context, in fix) (string, error) {
			w.add(ctx)
			return in.Action + " applied to " + in.Service, nil
		}, agent.NeedsApproval()),
	}
}

type harness struct {
	t      *testing.T
	stores store.Set
	cfg    func(*loom.Config)
}

func newHarness(t *testing.T) *harness { return &harness{t: t, stores: memstore.NewSet()} }

func (h *harness) runtime(flows ...*loom.Flow) *loom.Runtime {
	h.t.Helper()
	cfg := loom.Config{Storage: h.stores, Flows: flows, Durability: loom.StepDurable}
	cfg.Recovery.Disabled = true
	if h.cfg != nil {
		h.cfg(&cfg)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// runAgent runs cfg as the whole of a flow "f", to its end.
func (h *harness) runAgent(cfg agent.Config) loom.Result {
	h.t.Helper()
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (agent.Result, error) {
		return agent.Run(ctx, cfg, llm.UserText("q"))
	})
	rt := h.runtime(flow)
	ctx := context.Background()
	id, err := rt.Start(ctx, "f", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) events(id string) []event.Envelope {
	evs, err := h.stores.Events.ReadFrom(context.Background(), id, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func count(evs []event.Envelope, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// triageFlow runs the agent and returns its result.
func triageFlow(p llm.Provider, w *runs, mod func(*agent.Config)) *loom.Flow {
	cfg := agent.Config{ID: "triage", Provider: p, Model: "claude-sonnet-4-5", System: "You are on call.", Tools: tools(w)}
	if mod != nil {
		mod(&cfg)
	}
	return loom.NewFlow("triage", func(ctx *loom.Context, q string) (agent.Result, error) {
		return agent.Run(ctx, cfg, llm.UserText(q))
	}, agent.FlowOptions(cfg)...)
}

func result(t *testing.T, raw json.RawMessage) agent.Result {
	t.Helper()
	var r agent.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("decoding the result %s: %v", raw, err)
	}
	return r
}

func TestRunCallsToolsInParallelAndFeedsResultsBack(t *testing.T) {
	h := newHarness(t)
	w := newRuns()
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(
		llmtest.Calls(100, 20, "read_logs", `{"service":"checkout"}`, "read_metrics", `{"service":"checkout"}`),
		llmtest.Text("The pool is exhausted.", 200, 10))
	rt := h.runtime(triageFlow(p, w, nil))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "checkout is slow")
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, res.Output)
	if r.Text != "The pool is exhausted." || r.Stop != agent.StopEnd || r.Turns != 2 || r.Usage.Total() != 330 {
		t.Fatalf("result = %+v", r)
	}
	if w.get("triage/turn:1/tool:0") != 1 || w.get("triage/turn:1/tool:1") != 1 {
		t.Fatalf("tool runs = %v", w.n)
	}
	second := p.Requests()[1].Request
	last := second.Messages[len(second.Messages)-1]
	if last.Role != llm.RoleTool || len(last.ToolResults) != 2 || last.ToolResults[0].CallID != "call_0" ||
		!strings.Contains(last.ToolResults[1].Content, "2400") {
		t.Fatalf("the second request's last message = %+v", last)
	}
	if len(second.Tools) != 3 || !strings.Contains(string(second.Tools[2].InputSchema), `"rollback"`) {
		t.Fatalf("tool definitions = %+v", second.Tools)
	}
	evs := h.events(id)
	if n := count(evs, agent.TurnEvent); n != 2 {
		t.Fatalf("%s ×%d, want 2", agent.TurnEvent, n)
	}
	branches := 0
	for _, e := range evs {
		if e.Type == event.StepStarted && strings.Contains(string(e.Payload), `"branch"`) {
			branches++
		}
	}
	if branches != 2 {
		t.Fatalf("%d tool steps started in a Parallel branch, want 2", branches)
	}
}

func TestToolErrorsUnknownToolsAndBadArgumentsAreFedBack(t *testing.T) {
	h := newHarness(t)
	w := newRuns()
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(
		llmtest.Calls(10, 5, "read_metrics", `{"service":"broken"}`, "read_tracez", `{}`, "read_logs", `{"service":7}`),
		llmtest.Text("I could not read anything.", 10, 5))
	flow := loom.NewFlow("triage", func(ctx *loom.Context, q string) (agent.Result, error) {
		r, err := agent.Run(ctx, agent.Config{ID: "triage", Provider: p, Model: "m", Tools: tools(w)}, llm.UserText(q))
		if err != nil {
			return r, err
		}
		_, err = ctx.Suspend("done")
		return r, err
	})
	rt := h.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	results := p.Requests()[1].Request.Messages[2].ToolResults
	want := []string{"metrics backend timed out", `there is no tool \"read_tracez\"`, "do not match its schema"}
	for i, r := range results {
		if !r.IsError || !strings.Contains(r.Content, want[i]) {
			t.Errorf("result %d = %+v, want an error containing %q", i, r, want[i])
		}
	}
	if w.get("triage/turn:1/tool:0") != 1 || w.total() != 1 {
		t.Fatalf("tool runs = %v; only the known tool with good arguments may run", w.n)
	}
	_ = rt.Close()
	// A replay serves the failed tool's recorded error: it does not run again.
	rt2 := h.runtime(flow)
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "done"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, res.Output)
	if w.total() != 1 || len(p.Requests()) != 2 {
		t.Fatalf("after the replay: tool runs %v, model requests %d", w.n, len(p.Requests()))
	}
	statuses := []string{r.ToolCalls[0].Status, r.ToolCalls[1].Status, r.ToolCalls[2].Status}
	if fmt.Sprint(statuses) != "[error unknownTool invalidArguments]" {
		t.Fatalf("statuses = %v", statuses)
	}
}

func TestMaxTurnsAndBudgetStopTheRun(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*agent.Config)
		stop agent.Stop
		reqs int
	}{
		{"maxTurns", func(c *agent.Config) { c.MaxTurns = 2 }, agent.StopMaxTurns, 2},
		{"budget", func(c *agent.Config) { c.Budget.Tokens = 150 }, agent.StopBudget, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			p := llmtest.NewProvider(t, "anthropic")
			for range 3 {
				p.Enqueue(llmtest.Calls(60, 20, "read_logs", `{"service":"a"}`))
			}
			rt := h.runtime(triageFlow(p, newRuns(), c.mod))
			ctx := context.Background()
			id, _ := rt.Start(ctx, "triage", "q")
			res, err := rt.WaitForCompletion(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r := result(t, res.Output); r.Stop != c.stop || len(p.Requests()) != c.reqs {
				t.Fatalf("stop %s after %d requests, want %s after %d", r.Stop, len(p.Requests()), c.stop, c.reqs)
			}
		})
	}
}

func TestTheMeteringRingsBudgetDeniesTheNextTurn(t *testing.T) {
	h := newHarness(t)
	h.cfg = func(c *loom.Config) {
		c.Middleware = []effect.Middleware{middleware.Metering(middleware.Meter{}, middleware.Budget{Tokens: 100})}
	}
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(90, 20, "read_logs", `{"service":"a"}`))
	rt := h.runtime(triageFlow(p, newRuns(), nil))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	_, err := rt.WaitForCompletion(ctx, id)
	if err == nil || !strings.Contains(err.Error(), "quota") && !strings.Contains(err.Error(), "budget") {
		t.Fatalf("err = %v; want the run failed on the budget", err)
	}
	// The turn's tool is the next effect: it is denied, and the run ends.
	if n := count(h.events(id), event.QuotaExceeded); n != 1 || len(p.Requests()) != 1 {
		t.Fatalf("QUOTA_EXCEEDED ×%d, requests %d", n, len(p.Requests()))
	}
}

func TestAModelFailureIsTypedAndCatchable(t *testing.T) {
	h := newHarness(t)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Reply{Fail: llm.KindRefused, Message: "no"})
	flow := loom.NewFlow("triage", func(ctx *loom.Context, q string) (string, error) {
		_, err := agent.Run(ctx, agent.Config{ID: "a", Provider: p, Model: "m"}, llm.UserText(q))
		if f, ok := llm.FailureOf(err); ok {
			return "caught " + string(f.Kind), nil
		}
		return "", err
	})
	rt := h.runtime(flow)
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"caught refused"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
}

func TestLeanToolLogKeepsDigestsInsteadOfOutputs(t *testing.T) {
	h := newHarness(t)
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(1, 1, "read_logs", `{"service":"a"}`), llmtest.Text("done", 1, 1))
	rt := h.runtime(triageFlow(p, newRuns(), func(c *agent.Config) { c.ToolLog = agent.ToolLogLean }))
	ctx := context.Background()
	id, _ := rt.Start(ctx, "triage", "q")
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	e := result(t, res.Output).ToolCalls[0]
	if e.Output != nil || e.Bytes == 0 || !strings.HasPrefix(e.Digest, "sha256:") || e.StepID != "triage/turn:1/tool:0" {
		t.Fatalf("lean entry = %+v", e)
	}
}

func TestInvalidConfigsAreRefused(t *testing.T) {
	p := llmtest.NewProvider(t, "x")
	dup := agent.NewTool("t", "", func(context.Context, svc) (string, error) { return "", nil })
	for _, cfg := range []agent.Config{
		{Provider: p, Model: "m"},
		{ID: "a", Model: "m"},
		{ID: "a", Provider: p, Model: "m", MaxTurns: -1},
		{ID: "a", Provider: p, Model: "m", ToolLog: "tiny"},
		{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{dup, dup}},
		{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{agent.EffectTool("t", "", "x", json.RawMessage(`{"type":5}`))}},
	} {
		var ce *agent.ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) {
			t.Errorf("Validate(%+v) = %v, want a *agent.ConfigError", cfg, err)
		}
		h := newHarness(t)
		flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (agent.Result, error) { return agent.Run(ctx, cfg) })
		rt := h.runtime(flow)
		id, _ := rt.Start(context.Background(), "f", nil)
		if res, err := rt.WaitForCompletion(context.Background(), id); err == nil {
			t.Errorf("config %+v ran: %+v", cfg, res)
		}
	}
	if len(p.Requests()) != 0 {
		t.Fatal("a refused config called the model")
	}
}

// One *Tool shared by agents validated at once (the runs of one flow on
// several goroutines): its schema compiles once, and nothing races (run
// under -race); a bad schema is refused by every one of them.
func TestOneToolValidatedConcurrently(t *testing.T) {
	p := llmtest.NewProvider(t, "x")
	good := agent.EffectTool("lookup", "", "tool:lookup", json.RawMessage(`{"type":"object"}`))
	bad := agent.EffectTool("broken", "", "tool:broken", json.RawMessage(`{"type":5}`))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		tool := good
		if i%2 == 1 {
			tool = bad
		}
		wg.Go(func() {
			errs[i] = agent.Config{ID: "a", Provider: p, Model: "m", Tools: []*agent.Tool{tool}}.Validate()
		})
	}
	wg.Wait()
	for i, err := range errs {
		var ce *agent.ConfigError
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("validation %d of the good tool: %v", i, err)
		case i%2 == 1 && !errors.As(err, &ce):
			t.Errorf("validation %d of the broken tool: %v, want a *agent.ConfigError", i, err)
		}
	}
}
