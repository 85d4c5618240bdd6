package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/fold"
)

// cmdResolve gives the operator's verdict on an incident parked in doubt: a
// step that acts (an apply_fix call, escalate) started and its process stopped
// before its outcome was recorded. -done records what it produced (it
// acted); -rerun runs it again as a new attempt (it did not). The verdict
// names the parked step attempt, so it cannot land on another one.
func cmdResolve(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	done := fs.String("done", "", "the step acted: its output as `JSON`")
	rerun := fs.Bool("rerun", false, "the step did not act: run it again")
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	hasDone := false
	fs.Visit(func(f *flag.Flag) { hasDone = hasDone || f.Name == "done" })
	if hasDone == *rerun {
		return usagef("give one verdict: -done '<the step's output as JSON>' (it acted) or -rerun (it did not)")
	}
	if hasDone && !json.Valid([]byte(*done)) {
		return usagef(`-done takes the step's output as JSON, for example -done '{"change":"chg-1"}'`)
	}
	id := pos[0]
	s, st, err := c.openExecution(id)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	park := st.Variables.SuspendedOn
	if st.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt || park.Attempt == nil {
		h, herr := readHistory(c.ctx, s.stores.Events, id)
		if herr != nil {
			return herr
		}
		return fmt.Errorf("%s is not parked in doubt (%s): there is nothing to resolve", id, describeStatus(st, h))
	}
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	if err := c.samePlanner(s, h); err != nil {
		return err
	}
	v := loom.Verdict{StepID: park.StepID, Attempt: *park.Attempt, Done: hasDone}
	if hasDone {
		v.Output = json.RawMessage(*done)
	}
	if err := s.rt.ResolveInDoubt(c.ctx, id, v); err != nil {
		return c.explainRefusal(s, id, agent.ApprovalRequest{}, "", err)
	}
	if hasDone {
		fmt.Fprintf(c.stdout, "Resolved %s: %s attempt %d acted, with output %s (process %d).\n", id, v.StepID, v.Attempt, short(v.Output, 100), os.Getpid())
	} else {
		fmt.Fprintf(c.stdout, "Resolved %s: %s runs again, as attempt %d (process %d).\n", id, v.StepID, v.Attempt+1, os.Getpid())
	}
	return c.report(s, id, int64(len(h.events)))
}
