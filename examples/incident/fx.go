package main

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
)

// effectCounter counts, per step id, how often this process invoked a
// step's effect or its simulation — a tool, a model call, a flow step: the
// in-process evidence that a replay served a step from the log instead of
// running it (or asking the model) again.
type effectCounter struct {
	mu        sync.Mutex
	real      map[string]int
	simulated map[string]int
}

// newEffectCounter returns a counter that has counted nothing.
func newEffectCounter() *effectCounter {
	return &effectCounter{real: map[string]int{}, simulated: map[string]int{}}
}

// ran counts a real invocation of step id.
func (c *effectCounter) ran(id string) {
	c.mu.Lock()
	c.real[id]++
	c.mu.Unlock()
}

// simulatedRun counts a simulation of step id.
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

// steps lists every step id this process invoked, in flow order.
func (c *effectCounter) steps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id := range c.real { //loom:sorted sorted below
		ids = append(ids, id)
	}
	for id := range c.simulated { //loom:sorted sorted below
		if c.real[id] == 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareSteps)
	return ids
}

// modelCalls returns how often this process asked the model (any turn).
func (c *effectCounter) modelCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, k := range c.real { //loom:order-independent a sum
		if isModelStep(id) {
			n += k
		}
	}
	return n
}

// invoked lists the steps whose effect or simulation ran, in flow order,
// simulations marked.
func (c *effectCounter) invoked() []string {
	var out []string
	for _, id := range c.steps() {
		if c.runs(id) == 0 {
			id += " (simulation)"
		}
		out = append(out, id)
	}
	return out
}

// countedModel is a provider that reports each call to an effectCounter
// under the model step that made it, so a test (and the CLI) can tell a
// turn the model answered from one the log served.
type countedModel struct {
	llm.Provider
	fx *effectCounter
}

// Complete implements llm.Provider.
func (m countedModel) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	if ec := loom.EffectContext(ctx); ec != nil {
		m.fx.ran(ec.StepID)
	}
	return m.Provider.Complete(ctx, req, sink)
}

// stepRank orders step ids as the flow runs them: collect-signals, then
// the planner's turns (each its model call, then its tool calls by index),
// then verify-recovery and escalate.
func stepRank(id string) (major, turn, minor int) {
	switch id {
	case stepCollect:
		return 0, 0, 0
	case stepVerify:
		return 2, 0, 0
	case stepEscalate:
		return 3, 0, 0
	}
	turn, what, ok := plannerStep(id)
	if !ok {
		return 4, 0, 0
	}
	if i, isTool := strings.CutPrefix(what, "tool:"); isTool {
		n, _ := strconv.Atoi(i)
		return 1, turn, n + 1
	}
	return 1, turn, 0
}

// compareSteps orders step ids by stepRank, then by name.
func compareSteps(a, b string) int {
	am, at, an := stepRank(a)
	bm, bt, bn := stepRank(b)
	return cmp.Or(cmp.Compare(am, bm), cmp.Compare(at, bt), cmp.Compare(an, bn), strings.Compare(a, b))
}

// plannerStep splits a planner step id "planner/turn:<n>/<what>".
func plannerStep(id string) (turn int, what string, ok bool) {
	rest, ok := strings.CutPrefix(id, plannerID+"/turn:")
	if !ok {
		return 0, "", false
	}
	n, what, ok := strings.Cut(rest, "/")
	turn, err := strconv.Atoi(n)
	if !ok || err != nil {
		return 0, "", false
	}
	return turn, what, true
}

// isModelStep reports whether id is one of the planner's model calls.
func isModelStep(id string) bool {
	_, what, ok := plannerStep(id)
	return ok && what == "model"
}

// modelStepID is the step id of the planner's model call in turn n.
func modelStepID(n int) string { return plannerID + "/turn:" + strconv.Itoa(n) + "/model" }

// describeSteps renders step ids compactly, one planner turn per group:
// "collect-signals, planner turn 1 (model, tool:0, tool:1), verify-recovery".
func describeSteps(ids []string) string {
	var parts []string
	lastTurn := 0
	for _, id := range ids {
		turn, what, ok := plannerStep(id)
		if !ok {
			parts, lastTurn = append(parts, id), 0
			continue
		}
		if turn == lastTurn && len(parts) > 0 {
			parts[len(parts)-1] = strings.TrimSuffix(parts[len(parts)-1], ")") + ", " + what + ")"
			continue
		}
		parts, lastTurn = append(parts, "planner turn "+strconv.Itoa(turn)+" ("+what+")"), turn
	}
	return listOrNone(parts)
}
