package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/dst"
)

// incidentSeeds is how many seeds the example's flow runs under DST in the
// test command: an agent run is some 30 events and a model turn each
// (from the committed cassette), so fewer than the kernel's 1,000.
const incidentSeeds = 100

// TestRemediationUnderDST runs the remediation flow, its planner on the
// committed cassette and its runbook lookup over MCP on loopback, under
// the seeded simulator: crashes at any event (an in-flight model turn or
// tool call among them), refused appends, lost and doubled wake-ups,
// snapshot failures, early lease expiry, clock moves that fire the
// approval's 24h timer, and approvals, rejections and edits at its gate,
// each run checked against every invariant.
func TestRemediationUnderDST(t *testing.T) {
	m, rb, fx := committedModel(t), testRunbooks(t), newEffectCounter()
	reg, err := rb.effects(fx)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []Incident{checkoutIncident, memoryIncident}
	answers := []func(agent.ApprovalRequest) agent.Answer{approveAs("ann"), rejectAs("bob", "change freeze"), editTo("carol", "scale-out")}
	sim := &dst.Simulation{
		Flows: []dst.Flow{{
			Flow:  newRemediateFlow(fx, m, rb),
			Input: func(r *rand.Rand) any { return inputs[r.IntN(len(inputs))] },
			Answer: func(r *rand.Rand, gate string) any {
				if !strings.HasPrefix(gate, agent.GatePrefix) {
					return nil
				}
				return answers[r.IntN(len(answers))](agent.ApprovalRequest{})
			},
		}},
		Configure: func(cfg *loom.Config) { cfg.Effects = reg },
	}
	sum := dst.Check(t, sim, dst.CheckOptions{Seeds: incidentSeeds})
	t.Logf("dst: %d seeds in %s (%.0f seeds/min); %d model calls, %d recovery checks", sum.Runs,
		sum.Elapsed.Round(1e6), sum.SeedsPerMinute(), fx.modelCalls(), fx.runs(stepVerify))
}
