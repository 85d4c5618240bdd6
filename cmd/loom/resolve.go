package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

func (c *cli) resolveCommand() *cobra.Command {
	var (
		r            remote
		done, stepID string
		attempt      int64
		rerun, wait  bool
	)
	cmd := &cobra.Command{
		Use:   "resolve <id> (--done OUTPUT | --rerun)",
		Short: "Resolve an execution parked in doubt: the step acted (--done) or must run again (--rerun)",
		Long: `resolve gives the operator's verdict on an execution parked in doubt — a step
with side effects that started, and whose process stopped before its outcome
was recorded, so nobody knows whether it acted. Look at the world first
(the charge, the ticket, the deploy), then:

  --done OUTPUT   it acted: OUTPUT (JSON) is recorded as the step's output,
                  and the execution goes on from there;
  --rerun         it did not: the step runs again, as a new attempt.

The step and attempt in doubt are read from the execution (loom gate shows
them); --step and --attempt name them explicitly, and a verdict for any
other attempt than the parked one is refused with nothing recorded.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			id := a[0]
			hasDone := cmd.Flags().Changed("done")
			if hasDone == rerun {
				return usagef("give one verdict: --done OUTPUT (the step acted; OUTPUT is its output as JSON, for example --done '\"ch-42\"') or --rerun (it did not)")
			}
			p := wire.ResolveParams{ExecutionID: id, StepID: stepID, Done: hasDone, Wait: wait}
			if cmd.Flags().Changed("attempt") {
				p.Attempt = &attempt
			}
			if hasDone {
				out, err := jsonFlag("--done", done, `'"ch-42"'`)
				if err != nil {
					return err
				}
				if out == nil {
					return usagef("--done takes the step's output as JSON (null if it has none), for example --done '\"ch-42\"'")
				}
				p.Output = out
			}
			cl, err := r.client()
			if err != nil {
				return err
			}
			ctx, cancel := r.call(c)
			defer cancel()
			if p.StepID == "" || p.Attempt == nil {
				// The attempt the park is in doubt about, from the state.
				res, err := cl.State(ctx, wire.StateParams{ExecutionID: id})
				if err != nil {
					return r.reach(err)
				}
				st, err := res.Decode()
				if err != nil {
					return err
				}
				park := st.Variables.SuspendedOn
				if st.Status != fold.StatusSuspended || park == nil || park.On != fold.GateInDoubt || park.Attempt == nil {
					return &exitError{code: exitRefused, msg: fmt.Sprintf("%s is not parked in doubt (%s): there is nothing to resolve; loom gate %s shows what it waits for",
						id, describePark(st), id), data: map[string]any{"executionId": id, "status": string(st.Status)}}
				}
				if p.StepID == "" {
					p.StepID = park.StepID
				}
				if p.Attempt == nil {
					p.Attempt = park.Attempt
				}
			}
			var res wire.ResolveResult
			err = c.waitFor(p.Wait, func() (err error) {
				res, err = cl.Resolve(ctx, p)
				return err
			}, "resolving %s: waiting for it to settle", id)
			if err != nil {
				return r.reach(err)
			}
			if c.json {
				return c.printJSON(res)
			}
			if p.Done {
				fmt.Fprintf(c.stdout, "Resolved %s: step %s attempt %d acted, with output %s; the verdict is durable.\n", id, p.StepID, *p.Attempt, short(p.Output, 100))
			} else {
				fmt.Fprintf(c.stdout, "Resolved %s: step %s runs again, as attempt %d; the verdict is durable.\n", id, p.StepID, *p.Attempt+1)
			}
			return c.printSettled(id, res.State, wait)
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&done, "done", "", "the step acted: its output as `JSON`")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "the step did not act: run it again as a new attempt")
	cmd.Flags().StringVar(&stepID, "step", "", "the step `id` in doubt (default: the parked one)")
	cmd.Flags().Int64Var(&attempt, "attempt", 0, "the `attempt` in doubt (default: the parked one)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the execution parks again or ends")
	return cmd
}

// describePark says in a few words where an execution stands.
func describePark(st fold.State) string {
	if st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil {
		return "it is parked on gate " + st.Variables.SuspendedOn.On
	}
	return "it is " + string(st.Status)
}
