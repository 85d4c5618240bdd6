package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/store/memstore"
)

// scenario is one incident the committed cassette answers, and how its
// approver answers: the cassette is recorded by running every scenario,
// and the golden histories replay them (golden_test.go).
type scenario struct {
	name        string
	description string
	input       Incident
	// answer answers an approval request; nil leaves the gate unanswered
	// until its timeout rejects the call.
	answer func(agent.ApprovalRequest) agent.Answer
}

// The incidents of the demo and the tests.
var (
	checkoutIncident = Incident{Service: defaultService, Symptom: defaultSymptom}
	memoryIncident   = Incident{Service: "search", Symptom: "memory climbing, pods OOM-killed"}
)

// scenarios are recorded in this order; a request two of them share is
// recorded once (the checkout ones share their first three turns).
var scenarios = []scenario{
	{name: "approved", input: checkoutIncident, answer: approveAs("ann"),
		description: "the remediation flow: signals, the planner's three diagnoses in one turn (a parallel block), propose_fix, apply_fix parked on its call's approval gate and approved, the fix, the model's summary, the recovery check"},
	{name: "rejected", input: checkoutIncident, answer: rejectAs("bob", "change freeze"),
		description: "the same incident, apply_fix rejected at its gate: the model is told, answers without a fix, and the flow escalates"},
	{name: "edited", input: checkoutIncident, answer: editTo("carol", "scale-out"),
		description: "the same incident, the approver edits apply_fix's arguments (scale-out instead of rollback): the edited call runs"},
	{name: "memory", input: memoryIncident, answer: approveAs("dave"),
		description: "the memory scenario: the logs diagnosis wins and the planner restarts the pods"},
	{name: "timed-out", input: checkoutIncident,
		description: "nobody answers apply_fix's gate: its 24h timer fires, the call is rejected, and the flow escalates"},
}

// approveAs answers every call with an approval by by.
func approveAs(by string) func(agent.ApprovalRequest) agent.Answer {
	return func(agent.ApprovalRequest) agent.Answer { return agent.Answer{Decision: agent.DecisionApprove, By: by} }
}

// rejectAs answers every call with a rejection by by, for reason.
func rejectAs(by, reason string) func(agent.ApprovalRequest) agent.Answer {
	return func(agent.ApprovalRequest) agent.Answer {
		return agent.Answer{Decision: agent.DecisionReject, By: by, Reason: reason}
	}
}

// editTo approves the call with its variant replaced.
func editTo(by, variant string) func(agent.ApprovalRequest) agent.Answer {
	return func(req agent.ApprovalRequest) agent.Answer {
		var a applyArgs
		_ = json.Unmarshal(req.Arguments, &a)
		a.Variant = variant
		return agent.Answer{Decision: agent.DecisionEdit, Arguments: mustJSON(a), By: by, Reason: "scale out first, roll back after the sale"}
	}
}

// maxApprovalsPerScenario bounds the approvals one scenario answers (a
// live model could ask again after a rejection).
const maxApprovalsPerScenario = 4

// played is what running a scenario did: the gates it answered, in order,
// with the answers, and the flow's output.
type played struct {
	gates   []string
	answers []agent.Answer
	summary Summary
}

// play runs sc to its end on memory stores, with m as the planner's model
// and a runbook server of its own, answering each approval gate it parks
// on. A scenario without an answer stops at its first gate (its timeout is
// the golden harness's to fire).
func play(ctx context.Context, sc scenario, m model, id string) (_ played, err error) {
	rb, err := startRunbooks(ctx)
	if err != nil {
		return played{}, err
	}
	defer func() { err = errors.Join(err, rb.close()) }()
	events := memstore.NewEventStore()
	cfg := loom.Config{Events: events, Snapshots: memstore.NewSnapshotStore(),
		Branches: memstore.NewBranchRegistry(), Timers: memstore.NewTimerStore(), TimerPoll: -1}
	if err := rb.wire(&cfg, newEffectCounter(), m); err != nil {
		return played{}, err
	}
	rt, err := loom.New(cfg)
	if err != nil {
		return played{}, err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	if _, err := rt.Start(ctx, flowID, sc.input, loom.WithExecutionID(id)); err != nil {
		return played{}, err
	}
	var p played
	for range maxApprovalsPerScenario {
		st, err := rt.WaitForSuspend(ctx, id)
		var te *loom.ExecutionTerminatedError
		switch {
		case errors.As(err, &te) && te.State.Status == fold.StatusCompleted:
			err = json.Unmarshal(te.State.Variables.Output, &p.summary)
			return p, err
		case err != nil:
			return p, fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		h, err := readHistory(ctx, events, id)
		if err != nil {
			return p, err
		}
		req, ok := h.pending(st)
		if !ok {
			return p, fmt.Errorf("scenario %s: parked on %q, not an approval gate", sc.name, st.Variables.SuspendedOn.On)
		}
		if sc.answer == nil {
			p.gates = append(p.gates, req.Gate)
			return p, nil
		}
		a := sc.answer(req)
		if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: req.Gate, Payload: mustJSON(a)}); err != nil {
			return p, fmt.Errorf("scenario %s: answering %s: %w", sc.name, req.Gate, err)
		}
		p.gates, p.answers = append(p.gates, req.Gate), append(p.answers, a)
	}
	return p, fmt.Errorf("scenario %s: more than %d approvals", sc.name, maxApprovalsPerScenario)
}

// recordCassette records every scenario into a fresh cassette at path,
// asking from (the scripted model, or a live one) for each request the
// scenarios make, and saves it.
func recordCassette(ctx context.Context, path string, from llm.Provider, modelName string, w io.Writer) (int, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("recording starts a fresh cassette and could not remove %s: %w", path, err)
	}
	c, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: from, ScrubRequest: scrubRequest})
	if err != nil {
		return 0, err
	}
	m := model{provider: c, name: modelName}
	for _, sc := range scenarios {
		if sc.answer == nil {
			continue // its requests are the rejected scenario's (scrubRequest hides the reason)
		}
		p, err := play(ctx, sc, m, "record-"+sc.name)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(w, "   recorded scenario %-9s → %s\n", sc.name, p.summary.Outcome)
	}
	if err := c.Save(); err != nil {
		return 0, err
	}
	return c.Len(), nil
}

// defaultCassettePath is where -record writes without -cassette: the
// committed cassette in the source tree, found from the repository root or
// from this package's directory.
func defaultCassettePath() (string, error) {
	for _, p := range []string{filepath.Join("examples", "incident", cassetteName), cassetteName} {
		if fi, err := os.Stat(filepath.Dir(p)); err == nil && fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("-record writes the committed cassette, examples/incident/" + cassetteName +
		": run it from the repository root (or the package directory), or pass -cassette FILE")
}
