package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
)

// authn verifies resumes by a header-like member: the answer's "by" is
// trusted here only to name the principal, as a real authenticator would
// verify a token.
type authn struct{}

func (authn) Authenticate(_ context.Context, _ string, ev loom.ResumeEvent) (json.RawMessage, error) {
	var a agent.Answer
	if json.Unmarshal(ev.Payload, &a) == nil && a.By != "" {
		return json.Marshal(loom.Principal{ID: a.By, Tenant: "acme"})
	}
	return json.RawMessage(`"anonymous"`), nil
}

// parkedForApproval starts the triage flow with a model that asks to apply
// a fix, and returns the runtime, the execution and the pending request.
func parkedForApproval(t *testing.T, h *harness, p *llmtest.Provider, w *runs) (*loom.Runtime, string, agent.ApprovalRequest) {
	t.Helper()
	p.Enqueue(llmtest.Calls(10, 5, "apply_fix", `{"service":"checkout","action":"rollback"}`))
	rt := h.runtime(triageFlow(p, w, nil))
	ctx := context.Background()
	id, err := rt.Start(ctx, "triage", "fix checkout")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var req agent.ApprovalRequest
	for _, e := range h.events(id) {
		if e.Type == agent.ApprovalRequestEvent {
			if err := json.Unmarshal(e.Payload, &req); err != nil {
				t.Fatal(err)
			}
		}
	}
	digest, _ := agent.CallDigest("triage", "triage/turn:1/tool:0", "apply_fix", json.RawMessage(`{"service":"checkout","action":"rollback"}`))
	if req.Digest != digest || req.Gate != agent.GateFor("apply_fix", digest) || st.Variables.SuspendedOn.On != req.Gate {
		t.Fatalf("parked on %q, request %+v; want the gate of digest %s", st.Variables.SuspendedOn.On, req, digest)
	}
	if w.total() != 0 {
		t.Fatal("the tool ran before its approval")
	}
	return rt, id, req
}

func answer(gate string, a agent.Answer) loom.ResumeEvent {
	raw, _ := json.Marshal(a)
	return loom.ResumeEvent{EventType: gate, Payload: raw}
}

func TestApprovalBindsToTheExactCallAndRecordsThePrincipal(t *testing.T) {
	h := newHarness(t)
	h.cfg = func(c *loom.Config) { c.ResumeAuthenticator = authn{} }
	w := newRuns()
	p := llmtest.NewProvider(t, "anthropic")
	rt, id, req := parkedForApproval(t, h, p, w)
	ctx := context.Background()

	// Refusals change nothing: an answer for another call (a stale screen),
	// an answer the schema refuses, an edit the tool's schema refuses.
	stale, _ := agent.CallDigest("triage", "triage/turn:1/tool:0", "apply_fix", json.RawMessage(`{"service":"checkout","action":"restart"}`))
	before := len(h.events(id))
	for name, ev := range map[string]loom.ResumeEvent{
		"stale digest":           answer(agent.GateFor("apply_fix", stale), agent.Answer{Decision: agent.DecisionApprove}),
		"unknown decision":       answer(req.Gate, agent.Answer{Decision: "maybe"}),
		"edit without arguments": answer(req.Gate, agent.Answer{Decision: agent.DecisionEdit}),
		"edit off the schema": answer(req.Gate, agent.Answer{Decision: agent.DecisionEdit,
			Arguments: json.RawMessage(`{"service":"checkout","action":"explode"}`)}),
		"approve with arguments": answer(req.Gate, agent.Answer{Decision: agent.DecisionApprove,
			Arguments: json.RawMessage(`{"service":"checkout","action":"restart"}`)}),
	} { //loom:order-independent each refusal is checked on its own
		err := rt.Resume(ctx, id, ev)
		var refused *loom.ResumeRefusedError
		var invalid *loom.ResumePayloadValidationError
		if !errors.As(err, &refused) && !errors.As(err, &invalid) {
			t.Errorf("%s: Resume = %v, want a refusal", name, err)
		}
		if n := len(h.events(id)); n != before {
			t.Fatalf("%s: the refusal appended %d events", name, n-before)
		}
	}

	p.Enqueue(llmtest.Text("Restarted instead of rolling back.", 10, 5))
	if err := rt.Resume(ctx, id, answer(req.Gate, agent.Answer{Decision: agent.DecisionEdit, By: "ada",
		Arguments: json.RawMessage(`{"service":"checkout","action":"restart"}`), Reason: "a rollback loses the cache"})); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := result(t, res.Output)
	e := r.ToolCalls[0]
	if e.Status != agent.StatusOK || string(e.Output) != `"restart applied to checkout"` || e.Approval == nil {
		t.Fatalf("entry = %+v", e)
	}
	if a := e.Approval; a.Decision != agent.DecisionEdit || a.Digest != req.Digest || !strings.Contains(string(a.Principal), `"id":"ada"`) {
		t.Fatalf("approval = %+v (principal %s)", a, a.Principal)
	}
	if w.get("triage/turn:1/tool:0") != 1 {
		t.Fatalf("tool runs = %v", w.n)
	}
}

func TestARejectionIsFedBackAndTheToolNeverRuns(t *testing.T) {
	h := newHarness(t)
	w := newRuns()
	p := llmtest.NewProvider(t, "anthropic")
	rt, id, req := parkedForApproval(t, h, p, w)
	ctx := context.Background()
	p.Enqueue(llmtest.Text("Escalating to a human.", 10, 5))
	if err := rt.Resume(ctx, id, answer(req.Gate, agent.Answer{Decision: agent.DecisionReject, Reason: "not during the sale"})); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if w.total() != 0 {
		t.Fatal("a rejected tool ran")
	}
	last := p.Requests()[1].Request.Messages
	fed := last[len(last)-1].ToolResults[0]
	if !fed.IsError || !strings.Contains(fed.Content, "not during the sale") {
		t.Fatalf("the model was told %+v", fed)
	}
	if r := result(t, res.Output); r.ToolCalls[0].Status != agent.StatusRejected {
		t.Fatalf("entry = %+v", r.ToolCalls[0])
	}
	if n := count(h.events(id), event.StepStarted); n != 2 {
		t.Fatalf("STEP_STARTED ×%d, want the two model turns only", n)
	}
}

func TestFlowOptionsDeclareOneSchemaFamilyPerApprovalTool(t *testing.T) {
	cfg := agent.Config{ID: "a", Provider: llmtest.NewProvider(t, "x"), Model: "m", Tools: tools(newRuns())}
	f := loom.NewFlow("f", func(*loom.Context, struct{}) (string, error) { return "", nil }, agent.FlowOptions(cfg)...)
	if len(f.ResumeSchemas) != 1 || f.ResumeSchemas["approve.apply_fix:*"] == "" {
		t.Fatalf("resume schemas = %v", f.ResumeSchemas)
	}
	_ = llm.UserText
}
