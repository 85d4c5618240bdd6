package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
)

func (c *cli) stateCommand() *cobra.Command {
	var (
		storeSpec string
		at        sequenceValue
		internal  bool
	)
	cmd := &cobra.Command{
		Use:   "state <id>",
		Short: "Show an execution's folded state, now or at any sequence",
		Long: `state folds an execution's log — from the nearest snapshot, like the
runtime — and shows the state after the event at --at (default: the last).
An --at past the end of the log is refused (exit 4), saying where it ends;
a negative one is a usage error.
--json prints the canonical JSON (fold.Encode), byte-identical on every
conforming kernel; otherwise a summary: status, input and output, the gate it
is parked on, its lineage, steps, decisions and approvals. The kernel's own
decisions (__loom_now#n, __loom_random#n…) are left out of the summary
unless --internal is given; --json always holds them.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			n := int64(-1)
			if at.set {
				if n = at.n; n < 0 {
					return usagef("--at must be 0 or more")
				}
			}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.state(s, a[0], n, internal) })
		},
	}
	storeFlag(cmd, &storeSpec)
	sequenceFlag(cmd, &at, "at", "the state after the event at this `sequence` (default: the last)")
	cmd.Flags().BoolVar(&internal, "internal", false, "also list the kernel's own decisions (__loom_now#n, __loom_random#n…)")
	return cmd
}

func (c *cli) state(s *openedStore, id string, at int64, internal bool) error {
	st, err := c.stateAt(s, id, at)
	if err != nil {
		return err
	}
	if c.json {
		b, err := fold.Encode(st)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	return c.summarize(s, id, st, internal)
}

// stateAt is Source.StateAt with messages that say what to do. A negative
// at means the latest state. A sequence past the end of the log — up to
// math.MaxInt64 — is refused (exit 4) naming where the log really ends: the
// store is asked for at most math.MaxInt64-1, so the read's bound at+1
// cannot overflow into a negative one (which made --at 9223372036854775807
// report the snapshot's sequence as the end, or no execution at all). No log
// reaches either sequence, so the answer is the same.
func (c *cli) stateAt(s *openedStore, id string, at int64) (fold.State, error) {
	st, err := s.StateAt(c.ctx, id, min(at, math.MaxInt64-1))
	if se, ok := errors.AsType[*inspect.SequenceError](err); ok {
		err = &inspect.SequenceError{ExecutionID: se.ExecutionID, At: at, Last: se.Last}
	}
	if err != nil {
		return fold.State{}, c.explain(s, id, err)
	}
	return st, nil
}

// summarize prints a readable account of a state.
func (c *cli) summarize(s *openedStore, id string, st fold.State, internal bool) error {
	v := st.Variables
	flow := ""
	if head, err := s.Events.ReadFrom(c.ctx, id, 0); err == nil && len(head) > 0 {
		flow = " (" + head[0].WorkflowID + ")"
	}
	t := newTable(c.stdout, "Execution", id+flow)
	t.row("Status", fmt.Sprintf("%s at #%d, updated %s", st.Status, st.Sequence, stamp(st.UpdatedAt)))
	started := stamp(st.StartedAt)
	if len(v.Principal) > 0 {
		started += " by " + short(v.Principal, 60)
	}
	t.row("Started", started)
	t.row("Input", short(v.Input, 100))
	if len(v.Output) > 0 {
		t.row("Output", short(v.Output, 100))
	}
	if len(v.Error) > 0 {
		t.row("Error", short(v.Error, 100))
	}
	if st.Status == fold.StatusSuspended && v.SuspendedOn != nil {
		park := fmt.Sprintf("%s (since #%d)", v.SuspendedOn.On, v.SuspendedOn.Seq)
		if v.SuspendedOn.On == fold.GateInDoubt {
			park = fmt.Sprintf("in doubt (since #%d): %s; resolve it with loom resolve %s --done OUTPUT or --rerun",
				v.SuspendedOn.Seq, inDoubtAbout(v.SuspendedOn), id)
		}
		if child, ok := loom.AwaitedChild(st); ok {
			park = fmt.Sprintf("awaiting child %s (since #%d)", child, v.SuspendedOn.Seq)
		}
		if v.SuspendedOn.WakeAt != nil {
			park += ", times out " + stamp(*v.SuspendedOn.WakeAt)
		}
		t.row("Parked on", park)
	}
	if p, ok := loom.ParentOf(st); ok {
		t.row("Child of", fmt.Sprintf("%s (as %q)", p.ExecutionID, p.Name))
	}
	for _, ch := range loom.ChildrenOf(st) {
		policy := ""
		if ch.OnParentClose == loom.CloseAbandon {
			policy = ", abandoned if this ends first"
		}
		t.row("Child", fmt.Sprintf("%s: %s (%s%s)", ch.Name, ch.ID, ch.Flow, policy))
	}
	if link := lastFork(v.ForkChain); link != nil {
		fork := fmt.Sprintf("%s at #%d", link.ExecutionID, link.Sequence)
		if link.Simulate {
			fork += " (simulation)"
		}
		t.row("Fork of", fork)
	}
	for _, a := range v.Approvals {
		t.row("Approval", fmt.Sprintf("%s by %s (#%d)", a.Gate, short(a.Principal, 60), a.Seq))
	}
	for _, sh := range v.Shredded {
		t.row("Shredded", fmt.Sprintf("the data of subject %s was crypto-shredded (#%d): its payloads read as shredded markers", sh.Subject, sh.Seq))
	}
	hidden := 0
	for _, id := range sortedBySeq(v.Decisions, func(d fold.Decision) int64 { return ptrOr(d.Seq, -1) }) {
		d := v.Decisions[id]
		if !internal && internalDecisionID(id) {
			hidden++
			continue
		}
		seq := ""
		if d.Seq != nil {
			seq = fmt.Sprintf(" (#%d)", *d.Seq)
		}
		t.row("Decision", id+" = "+short(d.Choice, 80)+seq)
	}
	if hidden > 0 {
		t.row("Decisions", fmt.Sprintf("and %d of the kernel's own (--internal lists them)", hidden))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.Frames) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout)
	steps := newTable(c.stdout, "STEP", "STATUS", "ATTEMPT", "OUTPUT / ERROR")
	for _, sid := range sortedBySeq(st.Frames, func(f fold.Frame) int64 { return f.Seq }) {
		f := st.Frames[sid]
		result := short(f.Output, 70)
		switch {
		case f.ErrorChannel != "":
			result = "typed error on " + f.ErrorChannel + ": " + short(f.ErrorPayload, 60)
		case len(f.Error) > 0:
			result = "error: " + short(f.Error, 70)
		case len(f.Input) > 0:
			result = "input: " + short(f.Input, 70)
		}
		steps.row(sid, string(f.Status), strconv.FormatInt(f.Attempt, 10), result)
	}
	return steps.flush()
}

// sortedBySeq returns m's keys ordered by seq, then by key.
func sortedBySeq[V any](m map[string]V, seq func(V) int64) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(seq(m[a]), seq(m[b])), cmp.Compare(a, b))
	})
	return keys
}

func ptrOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}
