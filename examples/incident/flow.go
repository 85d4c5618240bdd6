package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
)

// flowID is the id the remediation flow is registered and logged under.
const flowID = "incident.remediate"

// approvalGate is the human gate; a resume must name it as its event type.
const approvalGate = "approval"

// approvalTimeout bounds the wait at the gate: the park records a wakeAt.
const approvalTimeout = 24 * time.Hour

// approvalSchema is the gate's resume schema: the runtime parses every answer
// with it before anything is appended, and refuses the rest.
const approvalSchema = `{
  "type": "object",
  "properties": {
    "approved": {"type": "boolean"},
    "by": {"type": "string"},
    "reason": {"type": "string"}
  },
  "required": ["approved"],
  "additionalProperties": false
}`

// Step ids, in the order the flow runs them.
const (
	stepCollect  = "collect-signals"
	stepLogs     = "diagnose#logs"
	stepMetrics  = "diagnose#metrics"
	stepDeploys  = "diagnose#deploys"
	stepPropose  = "model.propose"
	stepApply    = "apply-fix"
	stepVerify   = "verify-recovery"
	stepEscalate = "escalate"
)

// stepOrder lists every step id in flow order, for stable listings.
var stepOrder = []string{stepCollect, stepLogs, stepMetrics, stepDeploys, stepPropose, stepApply, stepVerify, stepEscalate}

// preGateSteps are the steps that run before the approval gate: a resume
// must serve them from the log.
var preGateSteps = stepOrder[:5]

// decisionRemediation is the id of the recorded plan choice.
const decisionRemediation = "remediation"

// emitProposed is the application event announcing the proposal.
const emitProposed = "incident.proposed"

// Incident is the flow's input.
type Incident struct {
	Service string `json:"service"`
	Symptom string `json:"symptom"`
}

// Approval is the answer at the approval gate (see approvalSchema).
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Choice is the recorded remediation decision: the plan and the rule that
// picked it.
type Choice struct {
	Plan Plan   `json:"plan"`
	Rule string `json:"rule"`
}

// Proposed is the payload of the incident.proposed event.
type Proposed struct {
	Incident string `json:"incident"`
	Service  string `json:"service"`
	Plan     Plan   `json:"plan"`
	At       string `json:"at"`
}

// Summary is the flow's output.
type Summary struct {
	Incident   string      `json:"incident"`
	Service    string      `json:"service"`
	At         string      `json:"at"`
	Plan       Plan        `json:"plan"`
	Outcome    string      `json:"outcome"` // fixed, not-recovered or escalated
	DecidedBy  string      `json:"decidedBy,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Fix        *FixResult  `json:"fix,omitempty"`
	Recovery   *Recovery   `json:"recovery,omitempty"`
	Escalation *Escalation `json:"escalation,omitempty"`
	Simulated  bool        `json:"simulated,omitempty"`
}

// Outcomes of the flow.
const (
	outcomeFixed        = "fixed"
	outcomeNotRecovered = "not-recovered"
	outcomeEscalated    = "escalated"
)

// effectCounter counts, per step id, how often this process invoked a step's
// effect or its simulation: the in-process evidence that a replay served a
// step from the log instead of running it again.
type effectCounter struct {
	mu        sync.Mutex
	real      map[string]int
	simulated map[string]int
}

func newEffectCounter() *effectCounter {
	return &effectCounter{real: map[string]int{}, simulated: map[string]int{}}
}

func (c *effectCounter) ran(id string) {
	c.mu.Lock()
	c.real[id]++
	c.mu.Unlock()
}

func (c *effectCounter) simulatedRun(id string) {
	c.mu.Lock()
	c.simulated[id]++
	c.mu.Unlock()
}

// runs returns how often the effect of step id ran for real.
func (c *effectCounter) runs(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real[id]
}

// simulations returns how often the simulation of step id ran.
func (c *effectCounter) simulations(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.simulated[id]
}

// invoked lists the steps whose effect or simulation ran, in flow order.
func (c *effectCounter) invoked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range stepOrder {
		switch {
		case c.real[id] > 0:
			out = append(out, id)
		case c.simulated[id] > 0:
			out = append(out, id+" (simulation)")
		}
	}
	return out
}

// newRemediateFlow builds the incident.remediate flow. Its steps report to
// fx, so a process can tell what it ran from what the log served.
func newRemediateFlow(fx *effectCounter) *loom.Flow {
	collect := loom.NewStep(stepCollect, func(_ context.Context, in Incident) (Signals, error) {
		fx.ran(stepCollect)
		return scriptedSignals(in), nil
	}, loom.ReadOnly())
	diagnose := func(id string, fn func(Signals) Diagnosis) *loom.Step[Signals, Diagnosis] {
		return loom.NewStep(id, func(_ context.Context, s Signals) (Diagnosis, error) {
			fx.ran(id)
			return fn(s), nil
		}, loom.ReadOnly())
	}
	logs, metrics, deploys := diagnose(stepLogs, diagnoseLogs), diagnose(stepMetrics, diagnoseMetrics), diagnose(stepDeploys, diagnoseDeploys)
	propose := loom.NewStep(stepPropose, func(_ context.Context, in ModelInput) (Proposal, error) {
		fx.ran(stepPropose)
		return scriptedModel(in), nil
	}, loom.Kind("llm"), loom.ToolID("model.scripted"), loom.ReadOnly())
	apply := loom.NewStep(stepApply, func(ctx context.Context, in FixInput) (FixResult, error) {
		fx.ran(stepApply)
		return applyFix(loom.IdempotencyKey(ctx), in, false), nil
	}, loom.NonIdempotent(), loom.Simulation(func(ctx context.Context, in FixInput) (FixResult, error) {
		fx.simulatedRun(stepApply)
		return applyFix(loom.IdempotencyKey(ctx), in, true), nil
	}))
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

	body := func(ctx *loom.Context, in Incident) (Summary, error) {
		signals, err := loom.Run(ctx, collect, in)
		if err != nil {
			return Summary{}, err
		}
		run := func(s *loom.Step[Signals, Diagnosis]) func(*loom.Context) (Diagnosis, error) {
			return func(c *loom.Context) (Diagnosis, error) { return loom.Run(c, s, signals) }
		}
		diagnoses, err := loom.Parallel(ctx, run(logs), run(metrics), run(deploys))
		if err != nil {
			return Summary{}, err
		}
		proposal, err := loom.Run(ctx, propose, ModelInput{Incident: in, Diagnoses: diagnoses})
		if err != nil {
			return Summary{}, err
		}
		choice, err := loom.Decide(ctx, decisionRemediation, func() (Choice, error) {
			return chooseRemediation(diagnoses, proposal)
		})
		if err != nil {
			return Summary{}, err
		}
		at := loom.Now(ctx).UTC().Format(time.RFC3339)
		sum := Summary{Incident: ctx.ExecutionID(), Service: in.Service, At: at, Plan: choice.Plan, Simulated: ctx.Simulating()}
		if err := ctx.Emit(emitProposed, Proposed{Incident: sum.Incident, Service: in.Service, Plan: choice.Plan, At: at}); err != nil {
			return Summary{}, err
		}

		answer, err := loom.Suspend[Approval](ctx, approvalGate, loom.Timeout(approvalTimeout))
		if err != nil {
			return Summary{}, err
		}
		sum.DecidedBy, sum.Reason = answer.By, answer.Reason
		if !answer.Approved {
			if sum.Reason == "" {
				sum.Reason = "not approved"
			}
			esc, err := loom.Run(ctx, escalate, EscalationInput{Incident: sum.Incident, Service: in.Service, Plan: choice.Plan, Reason: sum.Reason})
			if err != nil {
				return Summary{}, err
			}
			sum.Outcome, sum.Escalation = outcomeEscalated, &esc
			return sum, nil
		}
		fixIn := FixInput{Service: in.Service, Plan: choice.Plan, Signals: signals}
		fix, err := loom.Run(ctx, apply, fixIn)
		if err != nil {
			return Summary{}, err
		}
		rec, err := loom.Run(ctx, verify, fixIn)
		if err != nil {
			return Summary{}, err
		}
		sum.Fix, sum.Recovery = &fix, &rec
		sum.Outcome = outcomeFixed
		if !rec.Recovered {
			sum.Outcome = outcomeNotRecovered
		}
		return sum, nil
	}
	return loom.NewFlow(flowID, body, loom.WithResumeSchema(approvalGate, approvalSchema))
}

// chooseRemediation is the decision rule: follow the most confident
// diagnosis to the plan that addresses it, else take the model's first plan.
func chooseRemediation(diagnoses []Diagnosis, p Proposal) (Choice, error) {
	if len(p.Plans) == 0 {
		return Choice{}, fmt.Errorf("the model proposed no plan")
	}
	best := slices.MaxFunc(diagnoses, func(a, b Diagnosis) int {
		if a.Confidence != b.Confidence {
			return a.Confidence - b.Confidence
		}
		return -compareSource(a.Source, b.Source) // ties: the earlier source wins
	})
	want := map[string]string{"deploy": "rollback", "saturation": "scale-out", "memory": "restart"}[best.Suspect]
	suspects := map[string]string{"deploy": "a deploy", "saturation": "saturation", "memory": "memory", "none": "nothing"}
	for _, plan := range p.Plans {
		if plan.Variant == want {
			return Choice{Plan: plan, Rule: fmt.Sprintf("the %s diagnosis is the most confident (%d%%) and points at %s",
				best.Source, best.Confidence, suspects[best.Suspect])}, nil
		}
	}
	return Choice{Plan: p.Plans[0], Rule: "no diagnosis points at a listed plan, so the model's first plan"}, nil
}

func compareSource(a, b string) int {
	order := []string{"logs", "metrics", "deploys"}
	return slices.Index(order, a) - slices.Index(order, b)
}
