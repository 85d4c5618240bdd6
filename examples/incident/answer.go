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
	"github.com/loom-kernel/loom/fold"
)

// cmdApprove answers the approval gate with an approval.
func cmdApprove(c *cli, args []string) error { return answerFlags(c, "approve", args, true) }

// cmdReject answers the approval gate with a rejection.
func cmdReject(c *cli, args []string) error { return answerFlags(c, "reject", args, false) }

// answerFlags parses approve and reject, which differ only in the verdict.
func answerFlags(c *cli, name string, args []string, approved bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	a := Approval{Approved: approved}
	fs.StringVar(&a.By, "by", defaultApprover(), "who answers")
	fs.StringVar(&a.Reason, "reason", "", "why (shown in the escalation when rejecting)")
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	payload, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return c.answer(pos[0], payload)
}

// cmdAnswer sends a raw JSON answer; the gate's resume schema judges it.
func cmdAnswer(c *cli, args []string) error {
	fs := flag.NewFlagSet("answer", flag.ContinueOnError)
	pos, err := c.flags(fs, args, "<id>", "<json>")
	if err != nil {
		return err
	}
	if !json.Valid([]byte(pos[1])) {
		return usagef(`the answer is not JSON; for example: '{"approved": true, "by": "ann"}'`)
	}
	return c.answer(pos[0], json.RawMessage(pos[1]))
}

// defaultApprover is $USER, else "operator".
func defaultApprover() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "operator"
}

// answer resumes id at the approval gate with payload and drives it until it
// ends or parks again, in this process.
func (c *cli) answer(id string, payload json.RawMessage) (err error) {
	s, err := c.open(false)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	err = s.rt.Resume(c.ctx, id, loom.ResumeEvent{EventType: approvalGate, Payload: payload})
	if err != nil {
		return c.explainRefusal(s, id, err)
	}
	var a Approval
	_ = json.Unmarshal(payload, &a)
	verb := "approval"
	if !a.Approved {
		verb = "rejection"
	}
	who := ""
	if a.By != "" {
		who = " by " + a.By
	}
	fmt.Fprintf(c.stdout, "Resumed %s with %s%s (process %d).\n", id, verb, who, os.Getpid())
	return c.report(s, id)
}

// report drives id, in this process, until it ends or parks again, and says
// what this process ran and how the incident stands.
func (c *cli) report(s *session, id string) error {
	st, err := s.rt.WaitForSuspend(c.ctx, id)
	var te *loom.ExecutionTerminatedError
	switch {
	case errors.As(err, &te):
		st = te.State
	case err != nil:
		return err
	}
	var served, rerun []string
	for _, step := range preGateSteps {
		if s.fx.runs(step)+s.fx.simulations(step) > 0 {
			rerun = append(rerun, step)
		} else if f, ok := st.Frames[step]; ok && f.Status == fold.FrameCompleted {
			served = append(served, step)
		}
	}
	fmt.Fprintf(c.stdout, "Served from the log, not invoked by this process: %s.\n", listOrNone(served))
	if len(rerun) > 0 {
		fmt.Fprintf(c.stdout, "Re-ran in this process although recorded before the gate: %s.\n", strings.Join(rerun, ", "))
	}
	fmt.Fprintf(c.stdout, "Ran in this process: %s.\n", listOrNone(s.fx.invoked()))
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	switch st.Status {
	case fold.StatusCompleted:
		sum, _ := h.summary()
		fmt.Fprintf(c.stdout, "Completed: %s.\n", describeOutcome(sum))
		return nil
	case fold.StatusSuspended:
		fmt.Fprintf(c.stdout, "Parked again: %s.\n", describeStatus(st, h))
		return nil
	}
	return fmt.Errorf("%s ended %s: %s; see incident log %s%s", id, st.Status, st.Variables.Error, id, c.dbFlag())
}

// explainRefusal turns a refused resume into what the user should do.
// Every refusal appended nothing.
func (c *cli) explainRefusal(s *session, id string, err error) error {
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
		return fmt.Errorf("refused, nothing recorded: %s is parked in doubt, not at the approval gate: a step that acts "+
			"started and its process stopped before its outcome was recorded. incident status %s%s says which; "+
			"check whether it acted, then resolve it: incident resolve %s -done '<its output as JSON>'%s, or incident resolve %s -rerun%s",
			id, id, c.dbFlag(), id, c.dbFlag(), id, c.dbFlag())
	case errors.As(err, &ve):
		return fmt.Errorf("refused, nothing recorded: the answer does not fit the approval gate's schema "+
			"(an object with approved: boolean, and optionally by and reason strings, nothing else): %s", ve.Detail)
	case errors.As(err, &rr) && rr.Reason == loom.RefusedTerminal:
		what := "it has ended"
		if h, herr := readHistory(c.ctx, s.stores.Events, id); herr == nil {
			if sum, ok := h.summary(); ok {
				what = "it has ended: " + describeOutcome(sum)
			}
		}
		return fmt.Errorf("refused, nothing recorded: %s was already answered and %s. An approval gate takes one answer; "+
			"to try the other answer, fork it at the gate: incident fork %s%s", id, what, id, c.dbFlag())
	case errors.As(err, &rr) && rr.Reason == loom.RefusedNotSuspended:
		return fmt.Errorf("refused, nothing recorded: %s is not waiting for approval yet (%s); "+
			"check incident status %s%s and retry once it is parked", id, rr.Detail, id, c.dbFlag())
	case errors.As(err, &rr):
		return fmt.Errorf("refused, nothing recorded (%s): %s", rr.Reason, rr.Detail)
	}
	return err
}
