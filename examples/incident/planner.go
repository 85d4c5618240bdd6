package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/middleware"
)

// plannerID is the agent's id: its steps are "planner/turn:<n>/model" and
// "planner/turn:<n>/tool:<i>".
const plannerID = "planner"

// The planner's tools, by the names the model calls them.
const (
	toolDiagnoseLogs    = "diagnose_logs"
	toolDiagnoseMetrics = "diagnose_metrics"
	toolDiagnoseDeploys = "diagnose_deploys"
	toolPropose         = "propose_fix"
	toolApply           = "apply_fix"
)

// Limits of a planner run.
const (
	// plannerMaxTurns bounds the model calls of one incident: the scripted
	// model needs four (diagnose, propose and look up the runbook, apply,
	// conclude).
	plannerMaxTurns = 8
	// plannerMaxTokens bounds each answer.
	plannerMaxTokens = 1024
)

// plannerSystem is the planner's instructions. It holds nothing that
// varies between runs, so the same incident sends the same requests.
const plannerSystem = `You are the incident planner of an SRE team. Work with the tools, in this order:
1. Diagnose: call diagnose_logs, diagnose_metrics and diagnose_deploys together, in one turn.
2. Call propose_fix with the cause the most confident diagnosis points at and, in the same turn, runbooks_lookup with that cause: the team's runbook for it.
3. Call apply_fix with the variant of the plan you recommend (the runbook's, when propose_fix lists it). A human approves the call before it runs, and may reject it or change the variant.
4. Finish with a short summary for the on-call engineer, without calling a tool. If apply_fix was rejected, do not propose or apply another fix: say so; the on-call team is paged.`

// incidentPrompt is the user message that opens the run.
func incidentPrompt(in Incident) string {
	return fmt.Sprintf("Incident on service %s: %s.\nService: %s\nSymptom: %s\nThe signals were collected when the incident opened; the diagnose tools read them.",
		in.Service, in.Symptom, in.Service, in.Symptom)
}

// serviceArgs are the arguments of the diagnose tools.
type serviceArgs struct {
	Service string `json:"service" jsonschema_description:"the affected service, as the incident names it"`
}

// proposeArgs are the arguments of propose_fix.
type proposeArgs struct {
	Service string `json:"service" jsonschema_description:"the affected service, as the incident names it"`
	Cause   string `json:"cause" jsonschema:"enum=deploy,enum=saturation,enum=memory,enum=none" jsonschema_description:"the suspect the most confident diagnosis points at"`
}

// applyArgs are the arguments of apply_fix: what the approver approves.
type applyArgs struct {
	Service string `json:"service" jsonschema_description:"the affected service, as the incident names it"`
	Variant string `json:"variant" jsonschema:"enum=rollback,enum=scale-out,enum=restart" jsonschema_description:"the plan to apply, by the variant propose_fix listed it under"`
}

// planner is the model the agent runs on, the counter its tools and model
// calls report to, and the MCP tools of this process's runbook server
// (which report through the mcp.invoke effect, see runbooks.effects).
type planner struct {
	provider llm.Provider
	model    string
	meter    middleware.Meter
	fx       *effectCounter
	mcpTools []*agent.Tool
}

// config is the agent of one incident: its tools read the signals
// collect-signals recorded for it.
func (p planner) config(sig Signals) agent.Config {
	return agent.Config{
		ID: plannerID, Provider: countedModel{Provider: p.provider, fx: p.fx}, Model: p.model,
		System: plannerSystem, Tools: p.tools(sig),
		MaxTurns: plannerMaxTurns, MaxTokens: plannerMaxTokens,
		ToolLog:         agent.ToolLogLean, // outputs stay in the tool steps' records, not twice in the log
		ApprovalTimeout: approvalTimeout,
		CallOptions:     []llm.CallOption{llm.WithMeter(p.meter)},
	}
}

// tools are the planner's tools over sig, then the runbook server's. The
// diagnoses, propose_fix and the runbook lookup are read-only; apply_fix
// changes production, so it needs approval and must never silently run
// twice. Each of ours answers canonical JSON (see canonicalTool).
func (p planner) tools(sig Signals) []*agent.Tool {
	diagnose := func(name, what string, fn func(Signals) Diagnosis) *agent.Tool {
		return agent.NewTool(name, "Diagnose the incident from the service's "+what+".",
			canonicalTool(p, sig, func(_ context.Context, in serviceArgs) (Diagnosis, error) { return fn(sig), nil }), agent.ReadOnly())
	}
	propose := agent.NewTool(toolPropose, "List the remediation plans for the incident, the one that addresses the given cause first.",
		canonicalTool(p, sig, func(_ context.Context, in proposeArgs) (Proposal, error) { return proposePlans(sig, in.Cause), nil }),
		agent.ReadOnly())
	apply := agent.NewTool(toolApply, "Apply one of propose_fix's plans to production. Needs a human's approval.",
		canonicalTool(p, sig, func(ctx context.Context, in applyArgs) (FixResult, error) {
			plan, ok := planFor(sig, in.Variant)
			if !ok {
				return FixResult{}, fmt.Errorf("no %s plan for this incident (propose_fix lists the ones there are)", in.Variant)
			}
			return applyFix(loom.IdempotencyKey(ctx), FixInput{Service: in.Service, Plan: plan, Signals: sig}, false), nil
		}), agent.NeedsApproval(), agent.NonIdempotent(),
		agent.Simulation(canonicalTool(p, sig, func(ctx context.Context, in applyArgs) (FixResult, error) {
			plan, ok := planFor(sig, in.Variant)
			if !ok {
				return FixResult{}, fmt.Errorf("no %s plan for this incident (propose_fix lists the ones there are)", in.Variant)
			}
			return applyFix(loom.IdempotencyKey(ctx), FixInput{Service: in.Service, Plan: plan, Signals: sig}, true), nil
		})))
	return append([]*agent.Tool{
		diagnose(toolDiagnoseLogs, "logs", diagnoseLogs),
		diagnose(toolDiagnoseMetrics, "metrics and connection pool", diagnoseMetrics),
		diagnose(toolDiagnoseDeploys, "recent deploys", diagnoseDeploys),
		propose, apply,
	}, p.mcpTools...)
}

// serviced is an argument type that names the incident's service.
type serviced interface{ service() string }

// service implements serviced.
func (a serviceArgs) service() string { return a.Service }

// service implements serviced.
func (a proposeArgs) service() string { return a.Service }

// service implements serviced.
func (a applyArgs) service() string { return a.Service }

// canonicalTool wraps a tool function: it counts the call, refuses a call
// about another service, and answers the result as canonical JSON (RFC
// 8785). The agent feeds a tool's output bytes to the model as they are —
// live the bytes the tool wrote, on replay the bytes the log holds — so the
// two must be the same whatever the store keeps: a store (or the golden
// format) that re-encodes JSON canonically would otherwise change the next
// request, and a cassette would not know it.
func canonicalTool[In serviced, Out any](p planner, sig Signals, fn func(context.Context, In) (Out, error)) func(context.Context, In) (json.RawMessage, error) {
	return func(ctx context.Context, in In) (json.RawMessage, error) {
		p.report(ctx)
		if err := sameService(sig, in.service()); err != nil {
			return nil, err
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		return event.Canonical(raw)
	}
}

// report counts a tool call under its step id.
func (p planner) report(ctx context.Context) {
	if ec := loom.EffectContext(ctx); ec != nil {
		p.fx.ran(ec.StepID)
	}
}

// sameService refuses a call about another service: the model is told.
func sameService(sig Signals, service string) error {
	if service != sig.Service {
		return fmt.Errorf("this incident is on service %q, not %q", sig.Service, service)
	}
	return nil
}

// flowOptions declares the resume schema of apply_fix's approval gates, so
// an answer off the schema is refused before anything is recorded.
func flowOptions() []loom.FlowOption {
	return agent.FlowOptions(planner{fx: newEffectCounter()}.config(Signals{}))
}

// The parts of a request that differ between two runs of the same
// incident, as ScrubRequest rewrites them: the change id apply_fix returns
// (it derives from the execution's idempotency key) and the reason an
// approver gave for a rejection (the model is told it; the escalation
// carries it).
var (
	changeID         = regexp.MustCompile(`chg-[0-9a-f]{8}`)
	rejectedPrefix   = "the call was rejected by its approver: "
	scrubbedChange   = "chg-<id>"
	scrubbedReason   = "<reason>"
	scrubbedRejected = `{"error":"` + rejectedPrefix + scrubbedReason + `"}`
)

// scrubRequest is the cassette's ScrubRequest: it replaces what varies
// between runs in apply_fix's results with placeholders, so one recorded
// answer serves every run. It copies what it edits: the cassette copies
// only the Messages slice, never a message's ToolResults, and a scrub must
// not edit the agent's own transcript.
func scrubRequest(req llm.Request) llm.Request {
	req.Messages = append([]llm.Message(nil), req.Messages...)
	for i, m := range req.Messages {
		if len(m.ToolResults) == 0 {
			continue
		}
		results := append([]llm.ToolResult(nil), m.ToolResults...)
		for j, r := range results {
			if r.Name != toolApply {
				continue
			}
			var e struct {
				Error string `json:"error"`
			}
			if r.IsError && json.Unmarshal([]byte(r.Content), &e) == nil && strings.HasPrefix(e.Error, rejectedPrefix) {
				results[j].Content = scrubbedRejected
				continue
			}
			results[j].Content = changeID.ReplaceAllString(r.Content, scrubbedChange)
		}
		req.Messages[i].ToolResults = results
	}
	return req
}

// approvalTimeout bounds the wait at an approval gate: the park records a
// wakeAt, and an unanswered call is rejected when it passes.
const approvalTimeout = 24 * time.Hour
