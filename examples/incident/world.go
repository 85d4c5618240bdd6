package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// The scripted world: what the steps and the planner's tools observe and
// do. Everything here is a pure function of its input — no network, no
// clock, no randomness — so the same incident always tells the same story.
// A real deployment would put API calls behind the same step and tool
// definitions; the flow would not change. (The model is not part of this
// world: see scriptedmodel.go and the cassette.)

// Signals is what collect-signals gathers about the service: the snapshot
// the planner's diagnose tools read.
type Signals struct {
	Service       string   `json:"service"`
	P99Ms         int      `json:"p99Ms"`
	BaselineP99Ms int      `json:"baselineP99Ms"`
	ErrorPermille int      `json:"errorPermille"` // failed requests per thousand
	PoolInUse     int      `json:"poolInUse"`
	PoolSize      int      `json:"poolSize"`
	Deploys       []Deploy `json:"deploys"`
	LogLines      []string `json:"logLines"`
}

// Deploy is one rollout seen before the onset.
type Deploy struct {
	Version            string `json:"version"`
	Previous           string `json:"previous"`
	MinutesBeforeOnset int    `json:"minutesBeforeOnset"`
}

// Diagnosis is what one diagnose tool found.
type Diagnosis struct {
	Source     string `json:"source"`     // logs, metrics or deploys
	Suspect    string `json:"suspect"`    // deploy, saturation, memory or none
	Confidence int    `json:"confidence"` // percent
	Finding    string `json:"finding"`
	// Deploy is the rollout a deploy suspect points at.
	Deploy *Deploy `json:"deploy,omitempty"`
}

// Plan is one remediation propose_fix lists.
type Plan struct {
	Variant string `json:"variant"` // rollback, scale-out or restart
	Action  string `json:"action"`
	Risk    string `json:"risk"`
}

// Proposal is what the propose_fix tool answers: the remediation plans for
// the incident, the one addressing the cause the model named first.
type Proposal struct {
	Cause string `json:"cause"`
	Plans []Plan `json:"plans"`
}

// FixInput is what verify-recovery checks, and what apply_fix acts on.
type FixInput struct {
	Service string  `json:"service"`
	Plan    Plan    `json:"plan"`
	Signals Signals `json:"signals"`
}

// FixResult is the change apply_fix made.
type FixResult struct {
	Change    string `json:"change"`
	Detail    string `json:"detail"`
	Simulated bool   `json:"simulated,omitempty"`
}

// Recovery is what verify-recovery measured after the fix.
type Recovery struct {
	P99Ms         int  `json:"p99Ms"`
	ErrorPermille int  `json:"errorPermille"`
	Recovered     bool `json:"recovered"`
}

// EscalationInput is what escalate hands the on-call team.
type EscalationInput struct {
	Incident string `json:"incident"`
	Service  string `json:"service"`
	Plan     Plan   `json:"plan"`
	Reason   string `json:"reason"`
}

// Escalation is the page escalate sent (or, simulated, would send).
type Escalation struct {
	Team      string `json:"team"`
	Ticket    string `json:"ticket"`
	Simulated bool   `json:"simulated,omitempty"`
}

// scriptedSignals returns the observations for an incident: a memory
// scenario when the symptom mentions memory, else a bad deploy that
// exhausted the connection pool.
func scriptedSignals(in Incident) Signals {
	sym := strings.ToLower(in.Symptom)
	if strings.Contains(sym, "memory") || strings.Contains(sym, "oom") {
		return Signals{Service: in.Service, P99Ms: 900, BaselineP99Ms: 180, ErrorPermille: 23, PoolInUse: 12, PoolSize: 32,
			LogLines: []string{
				"OOMKilled: container " + in.Service + "-7f9c exceeded its 2Gi limit",
				"GC pause 480ms, heap 1.9Gi",
			}}
	}
	return Signals{Service: in.Service, P99Ms: 2300, BaselineP99Ms: 180, ErrorPermille: 41, PoolInUse: 32, PoolSize: 32,
		Deploys: []Deploy{{Version: "v2.14.0", Previous: "v2.13.2", MinutesBeforeOnset: 12}},
		LogLines: []string{
			"pgx: timeout acquiring connection from pool (32/32 in use)",
			"POST /" + in.Service + " 504 after 2.0s",
		}}
}

// diagnoseLogs looks for a telling error in the log lines.
func diagnoseLogs(s Signals) Diagnosis {
	d := Diagnosis{Source: "logs", Suspect: "none", Confidence: 10, Finding: "no telling error in the logs"}
	for _, l := range s.LogLines {
		switch {
		case strings.Contains(l, "OOMKilled"):
			return Diagnosis{Source: "logs", Suspect: "memory", Confidence: 80, Finding: "containers are OOM-killed"}
		case strings.Contains(l, "acquiring connection"):
			d = Diagnosis{Source: "logs", Suspect: "saturation", Confidence: 70, Finding: "requests time out waiting for a database connection"}
		}
	}
	return d
}

// diagnoseMetrics compares latency with its baseline and checks the pool.
func diagnoseMetrics(s Signals) Diagnosis {
	ratio := fmt.Sprintf("p99 %dms is %s× its %dms baseline", s.P99Ms, tenths(s.P99Ms*10/max(s.BaselineP99Ms, 1)), s.BaselineP99Ms)
	if s.PoolInUse >= s.PoolSize {
		return Diagnosis{Source: "metrics", Suspect: "saturation", Confidence: 75,
			Finding: fmt.Sprintf("%s; connection pool %d/%d in use", ratio, s.PoolInUse, s.PoolSize)}
	}
	return Diagnosis{Source: "metrics", Suspect: "none", Confidence: 30,
		Finding: fmt.Sprintf("%s; connection pool has headroom (%d/%d)", ratio, s.PoolInUse, s.PoolSize)}
}

// diagnoseDeploys looks for a rollout in the hour before the onset.
func diagnoseDeploys(s Signals) Diagnosis {
	for _, d := range s.Deploys {
		if d.MinutesBeforeOnset <= 60 {
			return Diagnosis{Source: "deploys", Suspect: "deploy", Confidence: 85, Deploy: &d,
				Finding: fmt.Sprintf("%s rolled out %d min before the onset (previous %s)", d.Version, d.MinutesBeforeOnset, d.Previous)}
		}
	}
	return Diagnosis{Source: "deploys", Suspect: "none", Confidence: 5, Finding: "no deploy in the hour before the onset"}
}

// diagnoseAll runs the three diagnoses, in source order.
func diagnoseAll(s Signals) []Diagnosis {
	return []Diagnosis{diagnoseLogs(s), diagnoseMetrics(s), diagnoseDeploys(s)}
}

// proposePlans turns the incident's diagnoses into plans: the plan that
// addresses cause first (when the signals support one), then the plans of
// the other suspects, most confident first, then a plain restart. Each
// variant appears once.
func proposePlans(s Signals, cause string) Proposal {
	ds := diagnoseAll(s)
	slices.SortStableFunc(ds, func(a, b Diagnosis) int { return b.Confidence - a.Confidence })
	var plans []Plan
	add := func(p Plan, ok bool) {
		if ok && !slices.ContainsFunc(plans, func(q Plan) bool { return q.Variant == p.Variant }) {
			plans = append(plans, p)
		}
	}
	for _, d := range ds {
		if d.Suspect == cause {
			add(planForSuspect(s.Service, d))
		}
	}
	for _, d := range ds {
		add(planForSuspect(s.Service, d))
	}
	add(Plan{Variant: "restart", Action: "restart the " + s.Service + " pods one at a time", Risk: "low"}, true)
	return Proposal{Cause: cause, Plans: plans}
}

// planForSuspect is the plan that addresses a diagnosis's suspect, if any.
func planForSuspect(svc string, d Diagnosis) (Plan, bool) {
	switch d.Suspect {
	case "deploy":
		if d.Deploy != nil {
			return Plan{Variant: "rollback", Action: fmt.Sprintf("roll back %s from %s to %s", svc, d.Deploy.Version, d.Deploy.Previous), Risk: "low"}, true
		}
	case "saturation":
		return Plan{Variant: "scale-out", Action: "double the " + svc + " connection pool and add 2 replicas", Risk: "medium"}, true
	case "memory":
		return Plan{Variant: "restart", Action: "restart the " + svc + " pods one at a time with a 3Gi memory limit", Risk: "low"}, true
	}
	return Plan{}, false
}

// planFor is the plan of variant for the incident, as propose_fix lists
// it; false when the signals support no such plan (no deploy to roll back).
func planFor(s Signals, variant string) (Plan, bool) {
	for _, p := range proposePlans(s, "").Plans {
		if p.Variant == variant {
			return p, true
		}
	}
	return Plan{}, false
}

// mostConfident is the diagnosis a careful reader follows: the most
// confident, the earlier source on a tie.
func mostConfident(ds []Diagnosis) Diagnosis {
	return slices.MaxFunc(ds, func(a, b Diagnosis) int {
		if a.Confidence != b.Confidence {
			return a.Confidence - b.Confidence
		}
		return sourceRank(b.Source) - sourceRank(a.Source) // ties: the earlier source wins
	})
}

// sourceRank orders diagnosis sources: logs, metrics, deploys.
func sourceRank(s string) int { return slices.Index([]string{"logs", "metrics", "deploys"}, s) }

// applyFix "changes production": the change id derives from the step's
// idempotency key, so a retried attempt of the same change is recognisable.
func applyFix(key string, in FixInput, simulated bool) FixResult {
	r := FixResult{Change: "chg-" + event.FNV1a64([]byte(key))[:8], Detail: "applied: " + in.Plan.Action, Simulated: simulated}
	if simulated {
		r.Detail = "would apply: " + in.Plan.Action
	}
	return r
}

// checkRecovery reads the service's metrics after the fix.
func checkRecovery(in FixInput) Recovery {
	p99 := in.Signals.BaselineP99Ms * 105 / 100
	return Recovery{P99Ms: p99, ErrorPermille: 2, Recovered: p99 < 2*in.Signals.BaselineP99Ms}
}

// pageOnCall escalates to a person.
func pageOnCall(key string, in EscalationInput, simulated bool) Escalation {
	return Escalation{Team: "sre-oncall", Ticket: "ESC-" + strings.ToUpper(event.FNV1a64([]byte(key))[:6]), Simulated: simulated}
}

// tenths renders n tenths as "12.8".
func tenths(n int) string { return fmt.Sprintf("%d.%d", n/10, n%10) }

// permille renders a per-thousand rate as a percentage: 41 → "4.1%".
func permille(n int) string { return tenths(n) + "%" }
