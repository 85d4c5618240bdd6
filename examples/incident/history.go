package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/loom-kernel/loom/event"
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

// first returns the first event of type typ at or after sequence from.
func (h history) first(typ string, from int64) (event.Envelope, bool) {
	for _, e := range h.events {
		if e.Sequence >= from && e.Type == typ {
			return e, true
		}
	}
	return event.Envelope{}, false
}

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
	seen := map[string]bool{}
	for _, p := range h.started(from, to) {
		seen[p.StepID] = true
	}
	var ids []string
	for _, id := range stepOrder {
		if seen[id] {
			ids = append(ids, id)
		}
	}
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

// decision decodes the recorded choice of decision id into v and returns
// its event.
func (h history) decision(id string, v any) (event.Envelope, error) {
	for _, e := range h.events {
		if e.Type != event.DecisionRecorded {
			continue
		}
		var p decisionRecorded
		if json.Unmarshal(e.Payload, &p) == nil && p.DecisionID == id {
			return e, json.Unmarshal(p.Choice, v)
		}
	}
	return event.Envelope{}, fmt.Errorf("the log of %s holds no decision %q", h.id, id)
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

// park returns the first EXECUTION_SUSPENDED on the approval gate.
func (h history) park() (executionSuspended, event.Envelope, bool) {
	for _, e := range h.events {
		if e.Type != event.ExecutionSuspended {
			continue
		}
		var p executionSuspended
		if json.Unmarshal(e.Payload, &p) == nil && p.On == approvalGate {
			return p, e, true
		}
	}
	return executionSuspended{}, event.Envelope{}, false
}

// answer returns the first recorded answer to the approval gate.
func (h history) answer() (Approval, event.Envelope, bool) {
	for _, e := range h.events {
		if e.Type != event.ExecutionResumed {
			continue
		}
		var p executionResumed
		if json.Unmarshal(e.Payload, &p) != nil || p.EventType != approvalGate {
			continue
		}
		var a Approval
		if json.Unmarshal(p.Payload, &a) == nil {
			return a, e, true
		}
	}
	return Approval{}, event.Envelope{}, false
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
