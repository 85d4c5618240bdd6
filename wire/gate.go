package wire

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/admission"
)

// gate answers execution.gate: the execution's park, read from its folded
// state, with the JSON Schema the registered flow declares for each gate.
// It reads through the runtime, so the Authorizer's "query" applies.
func (h *handler) gate(ctx context.Context, p GateParams) (GateResult, error) {
	if err := requireID("executionId", p.ExecutionID); err != nil {
		return GateResult{}, err
	}
	st, err := h.rt.LoadState(ctx, p.ExecutionID)
	if err != nil {
		return GateResult{}, err
	}
	res := GateResult{ExecutionID: p.ExecutionID, Status: st.Status, Sequence: st.Sequence}
	if res.FlowID, err = h.rt.FlowOf(ctx, p.ExecutionID); err != nil {
		return GateResult{}, err
	}
	res.Gate = ParkedGate(st, flowSchemas(h.rt.Flows(), res.FlowID))
	return res, nil
}

// ParkedGate describes the park of a folded state, nil when it is not
// parked: what execution.gate answers. schemas are the flow's resume
// schemas by gate (loom.FlowInfo.ResumeSchemas); nil leaves Schema out,
// as a reader of a store without the flow's code must.
func ParkedGate(st fold.State, schemas map[string]json.RawMessage) *Gate {
	park := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || park == nil {
		return nil
	}
	g := &Gate{On: park.On, Kind: gateKind(park.On), Since: park.Seq, WakeAt: park.WakeAt, TimeoutMs: park.TimeoutMs,
		StepID: park.StepID, Attempt: park.Attempt}
	if g.Kind == GateNamed {
		g.Schema, _ = admission.ForGate(schemas, park.On)
	}
	for _, w := range admission.ParkWaits(st) {
		wait := Wait{WaitID: w.WaitID, Kind: w.Kind, On: w.On, Topic: w.Topic, WakeAt: w.WakeAt}
		if w.Kind == admission.WaitGate {
			wait.Schema, _ = admission.ForGate(schemas, w.On)
		}
		g.Waits = append(g.Waits, wait)
	}
	return g
}

// gateKind classifies a recorded gate name.
func gateKind(on string) string {
	switch {
	case on == fold.GateInDoubt:
		return GateInDoubt
	case on == fold.GateDiverged:
		return GateDiverged
	case on == admission.GateSleep:
		return GateSleep
	case on == admission.GateSelect:
		return GateSelect
	case strings.HasPrefix(on, admission.ReservedPrefix):
		return GateKernel
	}
	return GateNamed
}

// flowSchemas returns the resume schemas of flow id among flows.
func flowSchemas(flows []loom.FlowInfo, id string) map[string]json.RawMessage {
	for _, f := range flows {
		if f.ID == id {
			return f.ResumeSchemas
		}
	}
	return nil
}
