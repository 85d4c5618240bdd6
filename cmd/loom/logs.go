package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/event"
)

func (c *cli) logsCommand() *cobra.Command {
	var (
		storeSpec string
		from      int64
		follow    bool
	)
	cmd := &cobra.Command{
		Use:   "logs <id>",
		Short: "Print an execution's log, one line per event; --follow tails it",
		Long: `logs prints the events of an execution from --from on, one line each:
sequence, timestamp (UTC), event type and what it recorded. --json prints one
envelope per line instead, as stored. --follow keeps printing events as the
log grows, whichever process appends them, until interrupted (Ctrl-C), which
exits 0.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if from < 0 {
				return usagef("--from must be 0 or more")
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.logs(s, a[0], from, follow) })
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().Int64Var(&from, "from", 0, "start at this `sequence`")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing events as they are appended, until interrupted")
	return cmd
}

func (c *cli) logs(s *openedStore, id string, from int64, follow bool) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return usagef("%v", err)
	}
	evs, err := s.Events.ReadFrom(c.ctx, id, from)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		if _, err := s.StateAt(c.ctx, id, 0); err != nil {
			return notFoundf("no execution %q in %s: list them with loom ls --store %s", id, s.name, s.name)
		}
		if !follow {
			fmt.Fprintf(c.stderr, "No events from #%d on.\n", from)
			return nil
		}
	}
	for _, e := range evs {
		if err := c.printEvent(e); err != nil {
			return err
		}
		from = e.Sequence + 1
	}
	if !follow {
		return nil
	}
	sub, err := s.Source.Follow(c.ctx, id, from)
	if err != nil {
		return err
	}
	defer sub.Close()
	for e := range sub.Events() {
		if err := c.printEvent(e); err != nil {
			return err
		}
	}
	if err := sub.Err(); err != nil {
		return err
	}
	return nil // interrupted: a normal end of --follow
}

func (c *cli) printEvent(e event.Envelope) error {
	if c.json {
		b, err := event.Encode(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "#%-4d %s  %-20s %s%s\n", e.Sequence, stamp(e.Timestamp), e.Type, describe(e), marks(e))
	return err
}
