package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// verification is the outcome of verifyExecution.
type verification struct {
	events      int
	bytes       int
	digest      string
	snapshotSeq int64 // the snapshot the runtime started from, -1 for none
	lastSeq     int64
}

// verifyExecution re-folds the stored log from scratch and compares the
// encoding byte for byte with the runtime's LoadState (snapshot + tail).
func verifyExecution(ctx context.Context, s *session, id string) (verification, error) {
	h, err := readHistory(ctx, s.stores.Events, id)
	if err != nil {
		return verification{}, err
	}
	refolded, err := fold.Encode(fold.Fold(h.events))
	if err != nil {
		return verification{}, err
	}
	st, err := s.rt.LoadState(ctx, id)
	if err != nil {
		return verification{}, err
	}
	loaded, err := fold.Encode(st)
	if err != nil {
		return verification{}, err
	}
	v := verification{events: len(h.events), bytes: len(refolded), digest: event.SHA256(refolded), snapshotSeq: -1, lastSeq: st.Sequence}
	if snap, ok, err := s.stores.Snapshots.LoadLatest(ctx, id); err == nil && ok {
		v.snapshotSeq = snap.Sequence
	}
	if !bytes.Equal(refolded, loaded) {
		at := 0
		for at < min(len(refolded), len(loaded)) && refolded[at] == loaded[at] {
			at++
		}
		return v, fmt.Errorf("NOT byte-identical: re-folding the %d stored events gives %s (%d bytes), the runtime's state %s (%d bytes); first difference at byte %d",
			len(h.events), v.digest, len(refolded), event.SHA256(loaded), len(loaded), at)
	}
	return v, nil
}

// cmdVerify re-folds the stored log and compares it with the runtime's state.
func cmdVerify(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	v, err := verifyExecution(c.ctx, s, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Verified %s: re-folding the %d stored events gives byte-identical state (%s, %d bytes).\n", pos[0], v.events, v.digest, v.bytes)
	fmt.Fprintf(c.stdout, "The runtime's state came from %s.\n", v.source())
	return nil
}

// source says how the runtime's state was loaded.
func (v verification) source() string {
	if v.snapshotSeq < 0 {
		return "folding the log (no snapshot)"
	}
	return fmt.Sprintf("the snapshot at #%d plus the %d events after it", v.snapshotSeq, v.lastSeq-v.snapshotSeq)
}
