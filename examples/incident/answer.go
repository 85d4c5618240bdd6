package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/fold"
)

// cmdApprove approves the pending call, or with -variant approves it with
// another plan (an edit of its arguments).
func cmdApprove(c *cli, args []string) error {
	return answerFlags(c, "approve", args, agent.DecisionApprove)
}

// cmdReject rejects the pending call.
func cmdReject(c *cli, args []string) error {
	return answerFlags(c, "reject", args, agent.DecisionReject)
}

// answerFlags parses approve and reject, which differ in the decision.
func answerFlags(c *cli, name string, args []string, decision string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	a := agent.Answer{Decision: decision}
	fs.StringVar(&a.By, "by", defaultApprover(), "who answers")
	fs.StringVar(&a.Reason, "reason", "", "why (the model is told a rejection's reason; the escalation carries it)")
	digest := fs.String("digest", "", "answer only the call with this `digest` (incident status shows it): refused if the pending call is another")
	variant := ""
	if decision == agent.DecisionApprove {
		fs.StringVar(&variant, "variant", "", "approve with this plan `variant` instead (rollback, scale-out, restart): an edit of the call's arguments")
	}
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	return c.answer(pos[0], *digest, func(req agent.ApprovalRequest) (json.RawMessage, error) {
		if variant == "" {
			return mustJSON(a), nil
		}
		var args applyArgs
		if req.Tool != toolApply || json.Unmarshal(req.Arguments, &args) != nil {
			return nil, fmt.Errorf("-variant edits apply_fix's arguments; the pending call is %s %s", or(req.Tool, "none"), req.Arguments)
		}
		args.Variant = variant
		a.Decision, a.Arguments = agent.DecisionEdit, mustJSON(args)
		return mustJSON(a), nil
	})
}

// cmdAnswer sends a raw JSON answer; the gate's resume schema judges it.
func cmdAnswer(c *cli, args []string) error {
	fs := flag.NewFlagSet("answer", flag.ContinueOnError)
	digest := fs.String("digest", "", "answer only the call with this `digest`: refused if the pending call is another")
	pos, err := c.flags(fs, args, "<id>", "<json>")
	if err != nil {
		return err
	}
	if !json.Valid([]byte(pos[1])) {
		return usagef(`the answer is not JSON; for example: '{"decision": "approve", "by": "ann"}'`)
	}
	return c.answer(pos[0], *digest, func(agent.ApprovalRequest) (json.RawMessage, error) { return json.RawMessage(pos[1]), nil })
}

// defaultApprover is $USER, else "operator".
func defaultApprover() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "operator"
}

// answer finds the call id is waiting to approve, shows it, answers its
// gate (or, with digest, the gate of the call with that digest, which the
// runtime refuses unless it is the pending one) with the answer build
// returns, and drives id in this process until it ends or parks again.
func (c *cli) answer(id, digest string, build func(agent.ApprovalRequest) (json.RawMessage, error)) (err error) {
	s, st, err := c.openExecution(id)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	if err := c.samePlanner(s, h); err != nil {
		return err
	}
	req, pending := h.pending(st)
	gate := ""
	if pending {
		gate = req.Gate
		fmt.Fprintf(c.stdout, "Pending call: %s\n", describeCall(h, req))
	}
	if digest != "" {
		tool := or(req.Tool, toolApply)
		gate = agent.GateFor(tool, digest)
	}
	if gate == "" {
		gate = agent.GatePrefix + toolApply // refused below, with the reason
	}
	payload, err := build(req)
	if err != nil {
		return err
	}
	before := int64(len(h.events))
	if err := s.rt.Resume(c.ctx, id, loom.ResumeEvent{EventType: gate, Payload: payload}); err != nil {
		return c.explainRefusal(s, id, req, gate, err)
	}
	var ans agent.Answer
	_ = json.Unmarshal(payload, &ans) // the schema parsed it: it decodes
	who := ""
	if ans.By != "" {
		who = " by " + ans.By
	}
	fmt.Fprintf(c.stdout, "Resumed %s with %s%s at gate %s (process %d).\n", id, decisionText(ans.Decision), who, shortGate(gate), os.Getpid())
	return c.report(s, id, before)
}

// decisionText names a decision for people.
func decisionText(d string) string {
	switch d {
	case agent.DecisionApprove:
		return "approval"
	case agent.DecisionReject:
		return "rejection"
	case agent.DecisionEdit:
		return "approval of an edited call"
	}
	return "an answer"
}

// describeCall shows an approver the call: tool, arguments, what they
// denote, its step and its digest.
func describeCall(h history, req agent.ApprovalRequest) string {
	s := fmt.Sprintf("%s %s", req.Tool, short(req.Arguments, 200))
	var args applyArgs
	var sig Signals
	if req.Tool == toolApply && json.Unmarshal(req.Arguments, &args) == nil && h.output(stepCollect, &sig) == nil {
		if plan, ok := planFor(sig, args.Variant); ok {
			s += fmt.Sprintf(" → %s (%s risk)", plan.Action, plan.Risk)
		}
	}
	return s + fmt.Sprintf(" (call %s, digest %s)", req.StepID, req.Digest)
}

// samePlanner refuses to drive an incident whose planner ran on another
// model than this process's: its recorded turns would be served, but the
// next one would be asked of a model that never saw the conversation (and
// a cassette would hold no such request).
func (c *cli) samePlanner(s *session, h history) error {
	recorded := h.modelToolID()
	if recorded == "" || recorded == s.model.toolID() {
		return nil
	}
	return fmt.Errorf("refused, nothing recorded: %s's planner ran as %s, and this process's model is %s (%s): "+
		"answer it with the -provider and -model it was started with", h.id, recorded, s.model.toolID(), s.model.source)
}

// report drives id, in this process, until it ends or parks again, and says
// what this process ran, what the log served and how the incident stands;
// from is the log's length before this process acted on it.
func (c *cli) report(s *session, id string, from int64) error {
	st, err := s.rt.WaitForSuspend(c.ctx, id)
	var te *loom.ExecutionTerminatedError
	switch {
	case errors.As(err, &te):
		st = te.State
	case err != nil:
		return err
	}
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	var served, rerun []string
	for _, step := range h.completedBefore(from) {
		if s.fx.runs(step)+s.fx.simulations(step) > 0 {
			rerun = append(rerun, step)
		} else {
			served = append(served, step)
		}
	}
	fmt.Fprintf(c.stdout, "Served from the log, not invoked by this process: %s.\n", describeSteps(served))
	if len(rerun) > 0 {
		fmt.Fprintf(c.stdout, "Re-ran in this process although recorded before: %s.\n", strings.Join(rerun, ", "))
	}
	fmt.Fprintf(c.stdout, "Ran in this process: %s.\n", describeSteps(s.fx.invoked()))
	fmt.Fprintf(c.stdout, "Model calls this process made: %d (%s).\n", s.fx.modelCalls(), s.model.source)
	s.reportLookups(c.stdout)
	switch st.Status {
	case fold.StatusCompleted:
		sum, _ := h.summary()
		fmt.Fprintf(c.stdout, "Completed: %s.\n", describeOutcome(sum))
		return nil
	case fold.StatusSuspended:
		fmt.Fprintf(c.stdout, "Parked again: %s.\n", describeStatus(st, h))
		return nil
	}
	return fmt.Errorf("%s ended %s: %s; see incident log %s%s", id, st.Status, failureText(st.Variables.Error), id, c.dbFlag())
}

// explainRefusal turns a refused resume into what the user should do.
// Every refusal appended nothing.
func (c *cli) explainRefusal(s *session, id string, req agent.ApprovalRequest, gate string, err error) error {
	var (
		busy *loom.ExecutionBusyError
		rr   *loom.ResumeRefusedError
		ve   *loom.ResumePayloadValidationError
	)
	switch {
	case errors.Is(err, loom.ErrExecutionNotFound):
		return notFound(id)
	case errors.As(err, &busy): // before rr, which a busy error also matches
		by := "process " + busy.Owner
		if busy.Owner == "" {
			by = "a process that has not taken its lease yet"
		}
		wait := max(time.Until(busy.ExpiresAt).Round(time.Second), 0)
		return fmt.Errorf("refused, nothing recorded: %s is being driven by %s, perhaps one that was killed (its lease "+
			"lapses unless renewed): retry after %s (in %s)", id, by, busy.ExpiresAt.UTC().Format(time.RFC3339), wait)
	case errors.As(err, &ve) && ve.Gate == fold.GateInDoubt:
		return fmt.Errorf("refused, nothing recorded: %s is parked in doubt, not at an approval gate: a call that acts "+
			"started and its process stopped before its outcome was recorded. incident status %s%s says which; "+
			"check whether it acted, then resolve it: incident resolve %s -done '<its output as JSON>'%s, or incident resolve %s -rerun%s",
			id, id, c.dbFlag(), id, c.dbFlag(), id, c.dbFlag())
	case errors.As(err, &ve):
		return fmt.Errorf("refused, nothing recorded: the answer does not fit the approval gate's schema "+
			`(an object with decision: "approve", "reject" or "edit", arguments only with edit and matching the tool's schema, `+
			"optionally by and reason strings, nothing else): %s", ve.Detail)
	case errors.As(err, &rr) && rr.Reason == loom.RefusedTerminal:
		what := "it has ended"
		if h, herr := readHistory(c.ctx, s.stores.Events, id); herr == nil {
			if sum, ok := h.summary(); ok {
				what = "it has ended: " + describeOutcome(sum)
			}
		}
		return fmt.Errorf("refused, nothing recorded: %s was already answered and %s. An approval gate takes one answer; "+
			"to try the other answer, fork it at the gate: incident fork %s%s", id, what, id, c.dbFlag())
	case errors.As(err, &rr) && rr.Reason == loom.RefusedGateMismatch && req.Gate != "":
		return fmt.Errorf("refused, nothing recorded: the answer names gate %s, but %s waits on %s, the gate of the call "+
			"with digest %s: the call you reviewed is not the pending one. Review it (incident status %s%s) and answer again",
			gate, id, req.Gate, req.Digest, id, c.dbFlag())
	case errors.As(err, &rr) && (rr.Reason == loom.RefusedNotSuspended || rr.Reason == loom.RefusedGateMismatch):
		return fmt.Errorf("refused, nothing recorded: %s is not waiting for an approval (%s); "+
			"check incident status %s%s and retry once it is parked", id, rr.Detail, id, c.dbFlag())
	case errors.As(err, &rr):
		return fmt.Errorf("refused, nothing recorded (%s): %s", rr.Reason, rr.Detail)
	}
	return err
}

// shortGate abbreviates an approval gate's digest: approve.apply_fix:1a2b3c4d5e6f….
func shortGate(gate string) string {
	if i := strings.LastIndexByte(gate, ':'); i >= 0 && len(gate)-i > 13 {
		return gate[:i+13] + "…"
	}
	return gate
}

// mustJSON encodes a value known to encode.
func mustJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
