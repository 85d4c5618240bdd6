package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/llm"
)

// flowID is the id the remediation flow is registered and logged under.
const flowID = "incident.remediate"

// Step ids of the flow's own steps; the planner's are "planner/turn:…".
const (
	stepCollect  = "collect-signals"
	stepVerify   = "verify-recovery"
	stepEscalate = "escalate"
)

// Incident is the flow's input.
type Incident struct {
	Service string `json:"service"`
	Symptom string `json:"symptom"`
}

// Summary is the flow's output.
type Summary struct {
	Incident string `json:"incident"`
	Service  string `json:"service"`
	At       string `json:"at"`
	// Plan is the plan apply_fix was asked to run, as approved (or edited).
	Plan       *Plan       `json:"plan,omitempty"`
	Outcome    string      `json:"outcome"` // fixed, not-recovered or escalated
	DecidedBy  string      `json:"decidedBy,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Planner    PlannerRun  `json:"planner"`
	Fix        *FixResult  `json:"fix,omitempty"`
	Recovery   *Recovery   `json:"recovery,omitempty"`
	Escalation *Escalation `json:"escalation,omitempty"`
	Simulated  bool        `json:"simulated,omitempty"`
}

// PlannerRun is what the flow keeps of the agent run.
type PlannerRun struct {
	Model  string     `json:"model"` // the llm tool id its turns ran as
	Turns  int        `json:"turns"`
	Stop   agent.Stop `json:"stop,omitempty"`
	Answer string     `json:"answer,omitempty"` // the model's last text
	// Call is the apply_fix call's step id and Decision its approver's.
	Call     string `json:"call,omitempty"`
	Decision string `json:"decision,omitempty"`
	// Note says why the run ended early, when it did.
	Note string `json:"note,omitempty"`
}

// Outcomes of the flow.
const (
	outcomeFixed        = "fixed"
	outcomeNotRecovered = "not-recovered"
	outcomeEscalated    = "escalated"
)

// newRemediateFlow builds the incident.remediate flow over the planner's
// model m, its planner offering rb's runbook tool too. Its steps, tools and
// model calls report to fx (a runbook lookup through the effect
// rb.effects(fx) registers), so a process can tell what it ran from what
// the log served.
func newRemediateFlow(fx *effectCounter, m model, rb *runbooks) *loom.Flow {
	collect := loom.NewStep(stepCollect, func(_ context.Context, in Incident) (Signals, error) {
		fx.ran(stepCollect)
		return scriptedSignals(in), nil
	}, loom.ReadOnly())
	verify := loom.NewStep(stepVerify, func(_ context.Context, in FixInput) (Recovery, error) {
		fx.ran(stepVerify)
		return checkRecovery(in), nil
	}, loom.ReadOnly())
	escalate := loom.NewStep(stepEscalate, func(ctx context.Context, in EscalationInput) (Escalation, error) {
		fx.ran(stepEscalate)
		return pageOnCall(loom.IdempotencyKey(ctx), in, false), nil
	}, loom.Simulation(func(ctx context.Context, in EscalationInput) (Escalation, error) {
		fx.simulatedRun(stepEscalate)
		return pageOnCall(loom.IdempotencyKey(ctx), in, true), nil
	}))
	p := planner{provider: m.provider, model: m.name, meter: m.meter, fx: fx, mcpTools: rb.agentTools()}

	body := func(ctx *loom.Context, in Incident) (Summary, error) {
		signals, err := loom.Run(ctx, collect, in)
		if err != nil {
			return Summary{}, err
		}
		sum := Summary{Incident: ctx.ExecutionID(), Service: in.Service, At: loom.Now(ctx).UTC().Format(time.RFC3339),
			Simulated: ctx.Simulating(), Planner: PlannerRun{Model: m.toolID()}}
		res, err := agent.Run(ctx, p.config(signals), llm.UserText(incidentPrompt(in)))
		if err := sum.Planner.ended(res, err); err != nil {
			return Summary{}, err
		}
		call, ok := sum.applyCall(res, signals)
		if ok && call.Status == agent.StatusOK && sum.Plan != nil {
			var fix FixResult
			if err := json.Unmarshal(toolOutput(res, call.CallID), &fix); err != nil {
				return Summary{}, fmt.Errorf("decoding apply_fix's answer: %w", err)
			}
			rec, err := loom.Run(ctx, verify, FixInput{Service: in.Service, Plan: *sum.Plan, Signals: signals})
			if err != nil {
				return Summary{}, err
			}
			sum.Fix, sum.Recovery, sum.Outcome = &fix, &rec, outcomeFixed
			if !rec.Recovered {
				sum.Outcome = outcomeNotRecovered
			}
			return sum, nil
		}
		sum.Reason = escalationReason(sum, call, ok)
		esc, err := loom.Run(ctx, escalate, EscalationInput{Incident: sum.Incident, Service: in.Service, Plan: planOrZero(sum.Plan), Reason: sum.Reason})
		if err != nil {
			return Summary{}, err
		}
		sum.Outcome, sum.Escalation = outcomeEscalated, &esc
		return sum, nil
	}
	return loom.NewFlow(flowID, body, flowOptions()...)
}

// ended records how the agent run ended. A model call that failed on a
// typed channel (refused, rate limited after its retries…) is recorded, and
// the flow escalates; any other failure fails the flow. (In a simulated
// fork the model is asked for real — a model call is read-only — and
// apply_fix runs its simulation.)
func (r *PlannerRun) ended(res agent.Result, err error) error {
	r.Turns, r.Stop, r.Answer = res.Turns, res.Stop, res.Text
	switch f, typed := llm.FailureOf(err); {
	case err == nil:
	case typed:
		r.Note = fmt.Sprintf("the planner's model call failed: %s %s", f.Kind, f.Message)
	default:
		return err
	}
	return nil
}

// applyCall finds the run's last apply_fix call and records it: its step,
// its approver's answer and the plan it was to run (as edited).
func (sum *Summary) applyCall(res agent.Result, sig Signals) (agent.ToolCallEntry, bool) {
	var call agent.ToolCallEntry
	found := false
	for _, c := range res.ToolCalls {
		if c.Tool == toolApply {
			call, found = c, true
		}
	}
	if !found {
		return call, false
	}
	sum.Planner.Call = call.StepID
	args := call.Arguments
	if a := call.Approval; a != nil {
		sum.Planner.Decision, sum.DecidedBy, sum.Reason = a.Decision, a.By, a.Reason
		if a.Decision == agent.DecisionEdit {
			args = a.Arguments
		}
	}
	var aa applyArgs
	if json.Unmarshal(args, &aa) == nil {
		if plan, ok := planFor(sig, aa.Variant); ok {
			sum.Plan = &plan
		}
	}
	return call, true
}

// escalationReason says why the flow pages a person.
func escalationReason(sum Summary, call agent.ToolCallEntry, ok bool) string {
	switch {
	case ok && call.Status == agent.StatusRejected && sum.Reason != "":
		return sum.Reason
	case ok && call.Status == agent.StatusRejected:
		return "not approved"
	case sum.Planner.Note != "":
		return sum.Planner.Note
	case ok:
		return "apply_fix did not apply the fix (" + call.Status + ")"
	}
	return "the planner applied no fix"
}

// toolOutput is what a tool call answered, from the transcript (the lean
// tool-call log keeps only its digest).
func toolOutput(res agent.Result, callID string) json.RawMessage {
	for _, m := range res.Messages {
		for _, r := range m.ToolResults {
			if r.CallID == callID {
				return json.RawMessage(r.Content)
			}
		}
	}
	return nil
}

// planOrZero is *p, or the zero Plan when the planner chose none.
func planOrZero(p *Plan) Plan {
	if p == nil {
		return Plan{}
	}
	return *p
}
