package mcpserver

import (
	"encoding/json"

	"github.com/loom-kernel/loom"
)

// EffectStepID is the step id of the one step an EffectFlow runs.
const EffectStepID = "effect"

// EffectFlow returns a flow of one durable step that runs the effect
// registered as toolID in loom.Config.Effects (a qualified id
// "<effect>:<qualifier>" runs the effect "<effect>") with the flow's input,
// and completes with its output. Register it in loom.Config.Flows and
// expose it with a FlowTool to offer an effect as an MCP tool: the call is
// then recorded, authorized by the runtime's effect ring (grants, the
// effect authorizer) as the calling principal, and never runs twice once
// its outcome is in the log. opts configure the step (loom.NonIdempotent,
// loom.WithRetry, loom.ErrorChannel…).
func EffectFlow(flowID, toolID string, opts ...loom.StepOption) *loom.Flow {
	return &loom.Flow{ID: flowID, Body: func(ctx *loom.Context, input json.RawMessage) (any, error) {
		t := &loom.Task{ID: EffectStepID, Kind: "tool", ToolID: toolID}
		for _, o := range opts {
			o(t)
		}
		return ctx.Execute(t, input)
	}}
}
