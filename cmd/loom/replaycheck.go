package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/store"
)

func (c *cli) replayCheckCommand() *cobra.Command {
	var storeSpec string
	cmd := &cobra.Command{
		Use:   "replay-check <id>",
		Short: "Re-fold the log and compare it with every stored snapshot, byte for byte",
		Long: `replay-check re-folds an execution's whole log from scratch and, at the
sequence of every stored snapshot, compares the snapshot's state with the
re-folded one byte for byte (fold.Encode): fold(snapshot, tail) must equal
fold(log) for every snapshot (spec §4). It also checks the log's sequences are
contiguous from 0. A compacted log is re-folded whole, the events compaction
moved into the store's archive in their place. It exits 3 on any mismatch,
naming the sequence and the first differing path.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			return c.withStore(storeSpec, func(s *openedStore) error { return c.replayCheck(s, a[0]) })
		},
	}
	storeFlag(cmd, &storeSpec)
	return cmd
}

// snapshotCheck is the verdict on one snapshot.
type snapshotCheck struct {
	Sequence      int64  `json:"sequence"`
	SchemaVersion string `json:"schemaVersion,omitempty"`
	OK            bool   `json:"ok"`
	Problem       string `json:"problem,omitempty"`
}

// replayReport is what replay-check prints with --json.
type replayReport struct {
	ExecutionID string          `json:"executionId"`
	Length      int             `json:"length"` // the events re-folded: the log's length
	FinalDigest string          `json:"finalStateSha256"`
	Snapshots   []snapshotCheck `json:"snapshots"`
	OK          bool            `json:"ok"`
}

func (c *cli) replayCheck(s *openedStore, id string) error {
	// A compacted log is re-folded whole: its archived events in place.
	log, err := replay.History(c.ctx, s.Events, s.archive, id)
	if err != nil {
		return err
	}
	if len(log) == 0 {
		return c.explain(s, id, fmt.Errorf("%w: %q", loom.ErrExecutionNotFound, id))
	}
	rep := replayReport{ExecutionID: id, Length: len(log), Snapshots: []snapshotCheck{}, OK: true}
	for i, e := range log {
		if e.Sequence != int64(i) {
			return checkFailedf("the log of %s is not contiguous: event %d has sequence #%d", id, i, e.Sequence)
		}
	}
	var seqs []int64
	if s.Snapshots != nil {
		lister, ok := s.Snapshots.(store.SnapshotLister)
		if !ok {
			return unsupportedf("this store cannot list snapshots (no store.SnapshotLister), so they cannot all be checked")
		}
		if seqs, err = lister.ListSequences(c.ctx, id); err != nil {
			return err
		}
	}
	prog := c.newProgress()
	f := fold.NewFolder(fold.Initial())
	next := 0 // the next event of log to fold
	for i, seq := range seqs {
		prog.update("replay-check: snapshot %d of %d (#%d)", i+1, len(seqs), seq)
		for next < len(log) && int64(next) <= seq {
			f.Apply(log[next])
			next++
		}
		check := c.checkSnapshot(s, id, seq, log, f)
		rep.OK = rep.OK && check.OK
		rep.Snapshots = append(rep.Snapshots, check)
	}
	prog.done()
	for ; next < len(log); next++ {
		f.Apply(log[next])
	}
	final, err := fold.Encode(f.State())
	if err != nil {
		return err
	}
	rep.FinalDigest = event.SHA256(final)
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		c.printReplay(rep)
	}
	if !rep.OK {
		var bad []string
		for _, ch := range rep.Snapshots {
			if !ch.OK {
				bad = append(bad, fmt.Sprintf("#%d", ch.Sequence))
			}
		}
		return checkFailedf("%s: the snapshot(s) at %s differ from the re-folded log; the log is authoritative: "+
			"the runtime ignores a snapshot it cannot read, but a readable wrong one is served as is", id, strings.Join(bad, ", "))
	}
	return nil
}

// checkSnapshot compares the snapshot at seq with f, the log folded up to
// seq.
func (c *cli) checkSnapshot(s *openedStore, id string, seq int64, log []event.Envelope, f *fold.Folder) snapshotCheck {
	check := snapshotCheck{Sequence: seq}
	if seq >= int64(len(log)) {
		check.Problem = fmt.Sprintf("it is past the end of the log (#%d)", len(log)-1)
		return check
	}
	snap, ok, err := s.Snapshots.LoadAt(c.ctx, id, seq)
	switch {
	case err != nil:
		check.Problem = "it could not be read: " + err.Error()
		return check
	case !ok || snap.Sequence != seq:
		check.Problem = "the store lists it but does not load it"
		return check
	}
	check.SchemaVersion = snap.SchemaVersion
	st, err := snapshot.Decode(snap.SchemaVersion, snap.State)
	if err != nil {
		check.Problem = "it does not decode: " + err.Error()
		return check
	}
	want := f.State()
	a, errA := fold.Encode(st)
	b, errB := fold.Encode(want)
	if errA != nil || errB != nil {
		check.Problem = fmt.Sprintf("it does not encode: %v %v", errA, errB)
		return check
	}
	if bytes.Equal(a, b) {
		check.OK = true
		return check
	}
	d := stateDiff{}
	if err := diffStates(want, st, &d); err == nil {
		switch {
		case len(d.Changed) > 0:
			check.Problem = fmt.Sprintf("it differs at %s: the log folds to %s, the snapshot has %s", d.Changed[0].Path, render(d.Changed[0].From), render(d.Changed[0].To))
		case len(d.Added) > 0:
			check.Problem = fmt.Sprintf("it has %s, which the log does not fold to", d.Added[0].Path)
		case len(d.Removed) > 0:
			check.Problem = fmt.Sprintf("it lacks %s, which the log folds to", d.Removed[0].Path)
		}
	}
	if check.Problem == "" {
		check.Problem = "its bytes differ from the re-folded state"
	}
	return check
}

func (c *cli) printReplay(rep replayReport) {
	fmt.Fprintf(c.stdout, "replay-check %s: %d events re-folded from scratch\n", rep.ExecutionID, rep.Length)
	for _, ch := range rep.Snapshots {
		if ch.OK {
			fmt.Fprintf(c.stdout, "  ✓ snapshot #%d matches byte for byte\n", ch.Sequence)
		} else {
			fmt.Fprintf(c.stdout, "  ✗ snapshot #%d: %s\n", ch.Sequence, ch.Problem)
		}
	}
	if len(rep.Snapshots) == 0 {
		fmt.Fprintln(c.stdout, "  (no snapshots stored: the log is the only record, nothing to compare)")
	}
	fmt.Fprintf(c.stdout, "final state %s\n", rep.FinalDigest)
}
