package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
)

// cmdFork copies an execution's log up to a sequence into a new execution.
func cmdFork(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	at := fs.Int64("at", -1, "fork after the event at this `sequence` (default: the park at the first approval gate)")
	forkID := fs.String("id", "", "the fork's execution `id` (default: <id>-fork- and 4 random hex digits)")
	simulate := fs.Bool("simulate", true, "drive the fork in simulate mode: steps with side effects run their simulation")
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	id := pos[0]
	s, err := c.open(false)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	if *at < 0 {
		_, park, ok := h.park()
		if !ok {
			return fmt.Errorf("%s never parked at an approval gate: pass -at SEQ (incident log %s%s lists the sequences)", id, id, c.dbFlag())
		}
		*at = park.Sequence
	}
	if last := h.events[len(h.events)-1].Sequence; *at > last {
		return usagef("-at %d is past the end of the log (#%d): pick a sequence from incident log %s%s", *at, last, id, c.dbFlag())
	}
	if *forkID == "" {
		*forkID = newID(id+"-fork-", 4)
	}
	st, err := forkAt(c.ctx, s, id, *at, *forkID, *simulate)
	if err != nil {
		return err
	}
	mode := "for real"
	if *simulate {
		mode = "simulated: steps with side effects run their simulation, nothing acts for real; " +
			"a step with no simulation (a model call, apply_fix) stops the simulation"
	}
	fmt.Fprintf(c.stdout, "Forked %s at #%d into %s (%s). The original is untouched.\n", id, *at, *forkID, mode)
	fmt.Fprintf(c.stdout, "The fork is %s.\n", describeStatus(st, history{}))
	if st.Status == fold.StatusSuspended && isApprovalGate(st.Variables.SuspendedOn.On) {
		fmt.Fprintf(c.stdout, "Next: incident approve %s -by <name>%s   or   incident reject %s -reason <text>%s\n", *forkID, c.dbFlag(), *forkID, c.dbFlag())
	}
	return nil
}

// forkAt forks id after sequence at into forkID and, when the fork runs on
// from there, waits in this process until it parks or ends.
func forkAt(ctx context.Context, s *session, id string, at int64, forkID string, simulate bool) (fold.State, error) {
	opts := []loom.ForkOption{loom.ForkID(forkID)}
	if simulate {
		opts = append(opts, loom.SimulateFork())
	}
	if _, err := s.rt.Fork(ctx, id, at, opts...); err != nil {
		if errors.Is(err, loom.ErrExecutionNotFound) {
			return fold.State{}, notFound(id)
		}
		return fold.State{}, err
	}
	st, err := s.rt.WaitForSuspend(ctx, forkID)
	var te *loom.ExecutionTerminatedError
	if errors.As(err, &te) {
		return te.State, nil
	}
	return st, err
}
