package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/snapshot"
)

// Building workload d's parked log, and waiting for the snapshots the
// runtime writes in the background, so no write of one phase runs during
// the measurement of the next.

const (
	// snapshotPoll is how often the harness looks for a park's snapshot,
	// buildPoll how often for those of a build, which take seconds.
	snapshotPoll = time.Millisecond
	buildPoll    = 50 * time.Millisecond
	// buildQuiet is how long no new snapshot must appear before a build
	// whose periodic snapshots are not all there counts as settled.
	buildQuiet = 10 * time.Second
	// defaultSnapshotEvery is loom.Config's documented SnapshotEvery
	// default, which the probe runs under.
	defaultSnapshotEvery = 1000
)

// probeGates is the parks the probe must offer: the first, then one per
// warm and per cold resume.
func probeGates(reps int) int { return 2*(resumeWarmups+reps) + 1 }

// buildParked starts the probe with n/2 steps and enough gates for the
// resumes of both paths, waits for its park, then for the snapshots the
// build left to write, and returns the execution id and its park's
// sequence. It decodes the park's snapshot as a load would, so a snapshot
// the cold path would have to ignore fails here.
func buildParked(ctx context.Context, p *probeRuntime, n, reps int) (resumeSample, string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, resumeBuildTimeout)
	defer cancel()
	s := resumeSample{steps: n / 2}
	start := time.Now()
	id, err := p.rt.Start(ctx, resumeFlowID, resumeInput{Steps: s.steps, Gates: probeGates(reps)})
	if err != nil {
		return s, "", 0, err
	}
	st, err := p.rt.WaitForSuspend(ctx, id)
	if err != nil {
		return s, "", 0, err
	}
	s.build, s.events = time.Since(start), st.Sequence+1
	if err := awaitBuildSnapshots(ctx, p.snaps, id, st.Sequence); err != nil {
		return s, "", 0, err
	}
	s.settle = time.Since(start) - s.build
	snap, ok, err := p.snaps.LoadLatest(ctx, id)
	if err != nil || !ok || snap.Sequence != st.Sequence {
		return s, "", 0, errors.Join(errors.New("no snapshot at the park"), err)
	}
	s.snapshotBytes = len(snap.State)
	decoded, err := snapshot.Decode(snap.SchemaVersion, snap.State)
	if err != nil {
		return s, "", 0, fmt.Errorf("the park's snapshot: %w", err)
	}
	raw, err := fold.EncodeSnapshot(decoded)
	if err != nil {
		return s, "", 0, fmt.Errorf("the park's snapshot: %w", err)
	}
	s.snapshotJSONBytes = len(raw)
	return s, id, st.Sequence, p.healthy()
}

// awaitSnapshot polls until a snapshot at sequence at or later exists.
func awaitSnapshot(ctx context.Context, snaps *sqlite.SnapshotStore, id string, at int64) error {
	for {
		seqs, err := snaps.ListSequences(ctx, id)
		if err != nil {
			return err
		}
		if len(seqs) > 0 && seqs[len(seqs)-1] >= at {
			return nil
		}
		if err := pause(ctx, snapshotPoll); err != nil {
			return fmt.Errorf("no snapshot at sequence %d: %w", at, err)
		}
	}
}

// awaitBuildSnapshots waits until the build is quiet, so its background
// work does not run during the measured resumes. The journal checkpoints
// every defaultSnapshotEvery events once they are durable, off the write
// path and one save at a time; a checkpoint that comes due while a save
// runs replaces the one still waiting, so a fast build skips some, and the
// last one due (the highest k·N−1 <= park) is saved after all others. It
// returns once the park's snapshot and that last periodic one are stored
// — or, should the runtime skip even that one, once the park's is stored
// and no snapshot was added for buildQuiet.
func awaitBuildSnapshots(ctx context.Context, snaps *sqlite.SnapshotStore, id string, park int64) error {
	lastPeriodic := (park+1)/defaultSnapshotEvery*defaultSnapshotEvery - 1 // -1: none due
	last, lastChange := -1, time.Now()
	for {
		seqs, err := snaps.ListSequences(ctx, id)
		if err != nil {
			return err
		}
		_, parked := slices.BinarySearch(seqs, park)
		_, periodic := slices.BinarySearch(seqs, lastPeriodic)
		if parked && (periodic || lastPeriodic < 0 || time.Since(lastChange) > buildQuiet) {
			return nil
		}
		if len(seqs) != last {
			last, lastChange = len(seqs), time.Now()
		}
		if err := pause(ctx, buildPoll); err != nil {
			return fmt.Errorf("snapshots of the build (%d stored, park %v, last periodic %d %v): %w",
				len(seqs), parked, lastPeriodic, periodic, err)
		}
	}
}

// pause waits d, or returns the error of ctx.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
