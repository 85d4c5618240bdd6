package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func (c *cli) logsCommand() *cobra.Command {
	var (
		storeSpec        string
		from             sequenceValue
		follow, internal bool
	)
	cmd := &cobra.Command{
		Use:   "logs <id>",
		Short: "Print an execution's log, one line per event; --follow tails it until it ends",
		Long: `logs prints the events of an execution from --from on, one line each:
sequence, timestamp (UTC), event type and what it recorded (a retry shows the
error and the delay before the next attempt). The kernel's own decisions
(__loom_now#n, __loom_random#n, __loom_select#n…: the recorded clock
readings, random numbers and select choices that make replays exact) are
left out unless --internal is given; an operator's in-doubt verdict is always
shown. --json prints one envelope per line instead, every event as stored.

--follow keeps printing events as the log grows, whichever process appends
them, and exits 0 when the execution ends (completed, failed, cancelled or
continued as a new execution) or when interrupted (Ctrl-C).`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if from.n < 0 {
				return usagef("--from must be 0 or more")
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.logs(s, a[0], from.n, follow, internal) })
		},
	}
	storeFlag(cmd, &storeSpec)
	sequenceFlag(cmd, &from, "from", "start at this `sequence` (default 0, the first event)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing events as they are appended, until the execution ends or Ctrl-C")
	cmd.Flags().BoolVar(&internal, "internal", false, "also print the kernel's own decisions (__loom_now#n, __loom_random#n…)")
	return cmd
}

// logPrinter prints events and keeps the state they fold to, so a follower
// knows when the execution has ended.
type logPrinter struct {
	c        *cli
	internal bool
	hidden   int
	folder   *fold.Folder
}

func (c *cli) logs(s *openedStore, id string, from int64, follow, internal bool) error {
	if err := event.ValidateID("execution id", id); err != nil {
		return usagef("%v", err)
	}
	// The state before from (the nearest snapshot and a short tail), so a
	// follower knows when the execution ends.
	latest, err := s.StateAt(c.ctx, id, -1)
	if err != nil {
		return c.explain(s, id, err)
	}
	base := latest
	var evs []event.Envelope
	if from <= latest.Sequence {
		base = fold.Initial()
		if from > 0 {
			if base, err = s.StateAt(c.ctx, id, from-1); err != nil {
				return c.explain(s, id, err)
			}
		}
		if evs, err = s.Events.ReadFrom(c.ctx, id, from); err != nil {
			return err
		}
	} else if !follow {
		fmt.Fprintf(c.stderr, "No events from #%d on.\n", from)
	}
	p := &logPrinter{c: c, internal: internal, folder: fold.NewFolder(base)}
	next := base.Sequence + 1
	for _, e := range evs {
		if e.Sequence > next {
			// Compaction moved #next..#e.Sequence-1 into the archive: say
			// so, and go on from the state its snapshot holds.
			if !c.json {
				fmt.Fprintf(c.stdout, "… #%d–#%d compacted (in the archive)\n", next, e.Sequence-1)
			}
			st, err := s.StateAt(c.ctx, id, e.Sequence-1)
			if err != nil {
				return c.explain(s, id, err)
			}
			p.folder = fold.NewFolder(st)
		}
		if err := p.print(e); err != nil {
			return err
		}
		next = e.Sequence + 1
	}
	defer p.note()
	if !follow || p.ended() {
		return nil
	}
	sub, err := s.Source.Follow(c.ctx, id, next)
	if err != nil {
		return err
	}
	defer sub.Close()
	// While the log is idle, stderr (a terminal, or --progress always)
	// says what the follower waits for; the line is cleared before each
	// event prints, so it never mixes with the log on stdout.
	prog := c.newProgress()
	idle := prog.waiting("following %s: waiting for #%d (%s)", id, next, p.standing())
	defer func() { idle() }()
	for e := range sub.Events() {
		if e.Sequence < from {
			p.folder.Apply(e)
			continue
		}
		idle()
		if err := p.print(e); err != nil {
			return err
		}
		if p.ended() {
			idle = func() {}
			return nil
		}
		idle = prog.waiting("following %s: waiting for #%d (%s)", id, e.Sequence+1, p.standing())
	}
	return sub.Err() // nil when interrupted: a normal end of --follow
}

// standing says where the execution the events so far fold to stands:
// running, or parked and on what.
func (p *logPrinter) standing() string {
	st := p.folder.State()
	if st.Status == fold.StatusSuspended && st.Variables.SuspendedOn != nil {
		return "parked on " + st.Variables.SuspendedOn.On
	}
	return string(st.Status)
}

// print folds e and prints it.
func (p *logPrinter) print(e event.Envelope) error {
	p.folder.Apply(e)
	if p.c.json {
		b, err := event.Encode(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.c.stdout, "%s\n", b)
		return err
	}
	if !p.internal && kernelDecision(e) {
		p.hidden++
		return nil
	}
	_, err := fmt.Fprintf(p.c.stdout, "#%-4d %s  %-20s %s%s\n", e.Sequence, stamp(e.Timestamp), e.Type, describe(e), marks(e))
	return err
}

// ended reports whether the events so far end the execution, and then says
// how on stderr.
func (p *logPrinter) ended() bool {
	st := p.folder.State()
	if !st.Status.Terminal() {
		return false
	}
	if st.Status == fold.StatusContinued && st.Variables.ContinuedTo != "" {
		fmt.Fprintf(p.c.stderr, "The execution continued as %s: follow it with loom logs %s --follow\n", st.Variables.ContinuedTo, st.Variables.ContinuedTo)
	} else {
		fmt.Fprintf(p.c.stderr, "The execution %s at #%d.\n", st.Status, st.Sequence)
	}
	return true
}

// note says how many kernel decisions were left out.
func (p *logPrinter) note() {
	if p.hidden > 0 {
		fmt.Fprintf(p.c.stderr, "(%d kernel decision(s) not shown: --internal prints them)\n", p.hidden)
	}
}
