package eval

import (
	"math"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
)

// Costs is what an execution spent on models: its model calls (steps of
// kind llm, each counted once however many attempts it took), and the
// tokens and US dollars its RESOURCE_METERED events summed to (llm.Complete
// meters every attempt; a model missing from the price table meters tokens
// only, so CostUSD stays 0). Elapsed time is metered too but never
// reported: it differs on every run.
type Costs struct {
	ModelCalls int     `json:"modelCalls"`
	Tokens     float64 `json:"tokens"`
	CostUSD    float64 `json:"costUsd"`
}

// add is c plus o.
func (c Costs) add(o Costs) Costs {
	return Costs{ModelCalls: c.ModelCalls + o.ModelCalls, Tokens: c.Tokens + o.Tokens, CostUSD: roundCost(c.CostUSD + o.CostUSD)}
}

// costsOf reads an execution's costs from its folded state.
func costsOf(s fold.State) Costs {
	var c Costs
	for _, f := range s.Frames { //loom:order-independent a count
		if f.Kind == llm.TaskKind {
			c.ModelCalls++
		}
	}
	if r := s.Variables.Resources; r != nil {
		if r.Tokens != nil {
			c.Tokens = *r.Tokens
		}
		if r.CostUSD != nil {
			c.CostUSD = roundCost(*r.CostUSD)
		}
	}
	return c
}

// roundCost drops the float noise of a sum (0.00048000000000000007) at a
// nanodollar, far below any price.
func roundCost(usd float64) float64 { return math.Round(usd*1e9) / 1e9 }
