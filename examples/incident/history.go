package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/store"
)

// history is an execution's stored log, read back to tell what happened.
// Everything the CLI and the demo claim about a run comes from here (or
// from the runtime), never from what the code meant to do.
type history struct {
	id     string
	events []event.Envelope
}

// readHistory reads the whole log of id.
func readHistory(ctx context.Context, events store.EventStore, id string) (history, error) {
	evs, err := store.Read(ctx, events, id)
	if err != nil {
		return history{}, err
	}
	if len(evs) == 0 {
		return history{}, notFound(id)
	}
	return history{id: id, events: evs}, nil
}

// Payload shapes of the kernel events the story reads (docs/events.md).
type (
	stepStarted struct {
		StepID string `json:"stepId"`
		Kind   string `json:"kind"`
		ToolID string `json:"toolId"`
		Branch string `json:"branch"`
	}
	stepCompleted struct {
		StepID string          `json:"stepId"`
		Output json.RawMessage `json:"output"`
	}
	decisionRecorded struct {
		DecisionID string          `json:"decisionId"`
		Choice     json.RawMessage `json:"choice"`
	}
	executionResumed struct {
		EventType string          `json:"eventType"`
		Payload   json.RawMessage `json:"payload"`
	}
	executionSuspended struct {
		On        string `json:"on"`
		WakeAt    *int64 `json:"wakeAt"`
		TimeoutMs *int64 `json:"timeoutMs"`
	}
)

// last returns the last event of type typ.
func (h history) last(typ string) (event.Envelope, bool) {
	for i := len(h.events) - 1; i >= 0; i-- {
		if h.events[i].Type == typ {
			return h.events[i], true
		}
	}
	return event.Envelope{}, false
}

// input decodes the execution's recorded input.
func (h history) input() (Incident, error) {
	var p struct {
		Input Incident `json:"input"`
	}
	err := json.Unmarshal(h.events[0].Payload, &p)
	return p.Input, err
}

// started returns the STEP_STARTED payloads with sequence in [from, to),
// in log order.
func (h history) started(from, to int64) []stepStarted {
	var out []stepStarted
	for _, e := range h.events {
		if e.Sequence >= from && e.Sequence < to && e.Type == event.StepStarted {
			var p stepStarted
			if json.Unmarshal(e.Payload, &p) == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// startedIDs lists the step ids started in [from, to), in flow order.
func (h history) startedIDs(from, to int64) []string {
	var ids []string
	for _, p := range h.started(from, to) {
		if !slices.Contains(ids, p.StepID) {
			ids = append(ids, p.StepID)
		}
	}
	slices.SortFunc(ids, compareSteps)
	return ids
}

// completedBefore lists the steps completed before sequence to, in flow
// order.
func (h history) completedBefore(to int64) []string {
	var ids []string
	for _, e := range h.events {
		var p stepCompleted
		if e.Sequence < to && e.Type == event.StepCompleted && json.Unmarshal(e.Payload, &p) == nil && !slices.Contains(ids, p.StepID) {
			ids = append(ids, p.StepID)
		}
	}
	slices.SortFunc(ids, compareSteps)
	return ids
}

// stepStart returns the STEP_STARTED of step id.
func (h history) stepStart(id string) (stepStarted, event.Envelope, bool) {
	for _, e := range h.events {
		if e.Type != event.StepStarted {
			continue
		}
		var p stepStarted
		if json.Unmarshal(e.Payload, &p) == nil && p.StepID == id {
			return p, e, true
		}
	}
	return stepStarted{}, event.Envelope{}, false
}

// output decodes the recorded output of step id into v.
func (h history) output(id string, v any) error {
	for _, e := range h.events {
		if e.Type != event.StepCompleted {
			continue
		}
		var p stepCompleted
		if json.Unmarshal(e.Payload, &p) == nil && p.StepID == id {
			return json.Unmarshal(p.Output, v)
		}
	}
	return fmt.Errorf("the log of %s holds no completed step %q", h.id, id)
}

// decisionsIn lists the decision ids recorded in [from, to).
func (h history) decisionsIn(from, to int64) []string {
	var ids []string
	for _, e := range h.events {
		if e.Sequence >= from && e.Sequence < to && e.Type == event.DecisionRecorded {
			var p decisionRecorded
			if json.Unmarshal(e.Payload, &p) == nil {
				ids = append(ids, p.DecisionID)
			}
		}
	}
	return ids
}

// park returns the first EXECUTION_SUSPENDED on an approval gate.
func (h history) park() (executionSuspended, event.Envelope, bool) {
	for _, e := range h.events {
		if e.Type != event.ExecutionSuspended {
			continue
		}
		var p executionSuspended
		if json.Unmarshal(e.Payload, &p) == nil && isApprovalGate(p.On) {
			return p, e, true
		}
	}
	return executionSuspended{}, event.Envelope{}, false
}

// answer returns the first recorded answer to an approval gate.
func (h history) answer() (agent.Answer, event.Envelope, bool) {
	for _, e := range h.events {
		if e.Type != event.ExecutionResumed {
			continue
		}
		var p executionResumed
		if json.Unmarshal(e.Payload, &p) != nil || !isApprovalGate(p.EventType) {
			continue
		}
		var a agent.Answer
		if json.Unmarshal(p.Payload, &a) == nil {
			return a, e, true
		}
	}
	return agent.Answer{}, event.Envelope{}, false
}

// approvalRequest returns the last agent.approval.requested for gate.
func (h history) approvalRequest(gate string) (agent.ApprovalRequest, event.Envelope, bool) {
	for i := len(h.events) - 1; i >= 0; i-- {
		e := h.events[i]
		var r agent.ApprovalRequest
		if e.Type == agent.ApprovalRequestEvent && json.Unmarshal(e.Payload, &r) == nil && r.Gate == gate {
			return r, e, true
		}
	}
	return agent.ApprovalRequest{}, event.Envelope{}, false
}

// pending is the call st is parked waiting to approve, as the log
// announced it: the gate an answer must name, the tool and its arguments.
func (h history) pending(st fold.State) (agent.ApprovalRequest, bool) {
	park := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || park == nil || !isApprovalGate(park.On) {
		return agent.ApprovalRequest{}, false
	}
	r, _, ok := h.approvalRequest(park.On)
	return r, ok
}

// isApprovalGate reports whether gate is one of the agent's approval gates.
func isApprovalGate(gate string) bool { return strings.HasPrefix(gate, agent.GatePrefix) }

// modelTurn decodes the planner's answer in turn n, and its STEP_STARTED.
func (h history) modelTurn(n int) (llm.Response, stepStarted, bool) {
	var r llm.Response
	p, _, ok := h.stepStart(modelStepID(n))
	if !ok || h.output(modelStepID(n), &r) != nil {
		return llm.Response{}, stepStarted{}, false
	}
	return r, p, true
}

// toolOf is the tool a planner step called ("tool:apply_fix" → apply_fix),
// "" for a step that is no tool call.
func (h history) toolOf(stepID string) string {
	p, _, ok := h.stepStart(stepID)
	if !ok || p.Kind != "tool" {
		return ""
	}
	return strings.TrimPrefix(p.ToolID, "tool:")
}

// stepOfTool is the first step recorded under tool id toolID.
func (h history) stepOfTool(toolID string) (string, bool) {
	for _, p := range h.started(0, 1<<62) {
		if p.ToolID == toolID {
			return p.StepID, true
		}
	}
	return "", false
}

// modelToolID is the llm tool id the planner's first turn ran as.
func (h history) modelToolID() string {
	if _, p, ok := h.modelTurn(1); ok {
		return p.ToolID
	}
	return ""
}

// summary decodes the flow's recorded output, when it completed.
func (h history) summary() (Summary, bool) {
	e, ok := h.last(event.ExecutionCompleted)
	if !ok {
		return Summary{}, false
	}
	var p struct {
		Output Summary `json:"output"`
	}
	if json.Unmarshal(e.Payload, &p) != nil {
		return Summary{}, false
	}
	return p.Output, true
}

// simulated reports whether any event carries the simulate mark.
func (h history) simulated() bool {
	return slices.ContainsFunc(h.events, func(e event.Envelope) bool { return string(e.Metadata["simulate"]) == "true" })
}
