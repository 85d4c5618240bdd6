package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// Workload d: the latency of resuming a parked execution whose log is
// large, against one whose log is small, with snapshots on (the SQLite
// SnapshotStore, SnapshotEvery at its default). Each log is built by a flow
// that runs N/2 trivial steps (ids s#0…) and then parks; every resume is
// answered and the flow, after replaying its steps, parks again on the next
// gate. The latency is Resume → the next EXECUTION_SUSPENDED durable, as a
// subscriber to the log sees it.

const (
	resumeFlowID = "resume-probe"
	resumeGate   = "next"
)

// Limits of workload d.
const (
	// maxResumeEvents caps the size of a log the harness builds.
	maxResumeEvents = 10_000_000
	// maxResumeRepetitions caps the measured resumes per log (and the gates
	// the probe flow passes).
	maxResumeRepetitions = 1000
	// resumeWarmups resumes run before the measured ones and are dropped.
	resumeWarmups = 1
	// resumeBuildTimeout bounds building one log; resumeTimeout one resume
	// and the snapshot that follows it.
	resumeBuildTimeout = 30 * time.Minute
	resumeTimeout      = 5 * time.Minute
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

// resumeInput sizes the probe: Steps steps, then Gates parks.
type resumeInput struct {
	Steps int `json:"steps"`
	Gates int `json:"gates"`
}

// loopStep returns its input: the trivial step the probe loops over.
var loopStep = loom.NewStep("s", func(_ context.Context, i int) (int, error) { return i, nil })

// resumeProbeFlow runs in.Steps steps, then parks on resumeGate in.Gates
// times, then completes.
func resumeProbeFlow() *loom.Flow {
	return loom.NewFlow(resumeFlowID, func(ctx *loom.Context, in resumeInput) (int, error) {
		for i := range in.Steps {
			if _, err := loom.Run(ctx, loopStep.Iter(i), i); err != nil {
				return 0, err
			}
		}
		for range in.Gates {
			if _, err := loom.Suspend[int](ctx, resumeGate); err != nil {
				return 0, err
			}
		}
		return in.Gates, nil
	})
}

// resumeSample is what one log measured.
type resumeSample struct {
	events        int64 // log length at the first park
	snapshotBytes int
	build         time.Duration   // Start → the first park durable
	settle        time.Duration   // the park → the build's snapshots all stored
	latencies     []time.Duration // Resume call → next park durable
	calls         []time.Duration // Resume call → its return (the answer durable)
}

// measureResume runs workload d: small and large are target log lengths,
// reps the measured resumes of each.
func measureResume(ctx context.Context, dir string, sync sqlite.Synchronous, small, large, reps int,
	progress func(string, ...any)) (*ResumeReport, error) {
	s, err := resumeLatencies(ctx, dir, sync, small, reps, progress)
	if err != nil {
		return nil, err
	}
	l, err := resumeLatencies(ctx, dir, sync, large, reps, progress)
	if err != nil {
		return nil, err
	}
	r := &ResumeReport{
		Description: "Resume → next park of a parked execution, large log vs small log, SQLite snapshots " +
			"(SnapshotEvery default); median of the repetitions",
		SmallEvents: s.events, LargeEvents: l.events, Repetitions: reps,
		SmallSamplesMs: samplesMs(s.latencies), LargeSamplesMs: samplesMs(l.latencies),
		SmallResumeCallMs: millis(median(s.calls)), LargeResumeCallMs: millis(median(l.calls)),
		SmallSnapshotBytes: s.snapshotBytes, LargeSnapshotBytes: l.snapshotBytes,
		LargeBuildSec: round(l.build.Seconds()), LargeSettleSec: round(l.settle.Seconds()),
		Target: 2, Comparison: atMost,
	}
	sm, lm := median(s.latencies), median(l.latencies) // sorts: after the samples are listed
	r.SmallMs, r.LargeMs = millis(sm), millis(lm)
	if sm > 0 {
		r.Ratio = round(float64(lm) / float64(sm))
	}
	r.Met = sm > 0 && r.Ratio <= r.Target
	progress("workload d: resume %d events %.2f ms, %d events %.2f ms, ratio %.2f",
		r.SmallEvents, r.SmallMs, r.LargeEvents, r.LargeMs, r.Ratio)
	return r, nil
}

// resumeLatencies builds a log of about n events on a fresh database file,
// parks it, lets the snapshots of the build settle, and measures reps
// resumes after resumeWarmups unmeasured ones.
func resumeLatencies(ctx context.Context, dir string, sync sqlite.Synchronous, n, reps int,
	progress func(string, ...any)) (_ resumeSample, err error) {
	db, err := sqlite.Open(filepath.Join(dir, "d-"+strconv.Itoa(n)+".db"), sqlite.WithSynchronous(sync))
	if err != nil {
		return resumeSample{}, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	snaps := db.SnapshotStore()
	rt, err := loom.New(loom.Config{Events: db.EventStore(), Snapshots: snaps, Flows: []*loom.Flow{resumeProbeFlow()}})
	if err != nil {
		return resumeSample{}, err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()

	s, id, at, err := buildParked(ctx, rt, snaps, n, reps)
	if err != nil {
		return resumeSample{}, fmt.Errorf("workload d: building %d events: %w", n, err)
	}
	progress("workload d: built %d events in %v, its snapshots settled %v later (park snapshot %d bytes)",
		s.events, s.build.Round(time.Millisecond), s.settle.Round(time.Millisecond), s.snapshotBytes)

	// The resumes run under a profiler label (inherited by the goroutines
	// the runtime starts for them), so a CPU profile can keep them apart
	// from the build: go tool pprof -tagfocus phase=resume.
	labels := pprof.Labels("phase", "resume", "log", "events-"+strconv.FormatInt(s.events, 10))
	pprof.Do(ctx, labels, func(ctx context.Context) {
		for i := range resumeWarmups + reps {
			var lat, call time.Duration
			if lat, call, at, err = resumeOnce(ctx, rt, db.EventStore(), snaps, id, at, i); err != nil {
				err = fmt.Errorf("workload d: resume %d of the %d-event log: %w", i, n, err)
				return
			}
			if i >= resumeWarmups {
				s.latencies = append(s.latencies, lat)
				s.calls = append(s.calls, call)
			}
		}
	})
	return s, err
}

// buildParked starts the probe with n/2 steps and enough gates for the
// resumes, waits for its park, then for the snapshots the build left to
// write, and returns the execution id and its park's sequence.
func buildParked(ctx context.Context, rt *loom.Runtime, snaps *sqlite.SnapshotStore, n, reps int) (resumeSample, string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, resumeBuildTimeout)
	defer cancel()
	var s resumeSample
	start := time.Now()
	id, err := rt.Start(ctx, resumeFlowID, resumeInput{Steps: n / 2, Gates: resumeWarmups + reps + 1})
	if err != nil {
		return s, "", 0, err
	}
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		return s, "", 0, err
	}
	s.build, s.events = time.Since(start), st.Sequence+1
	if err := awaitBuildSnapshots(ctx, snaps, id, st.Sequence); err != nil {
		return s, "", 0, err
	}
	s.settle = time.Since(start) - s.build
	snap, ok, err := snaps.LoadLatest(ctx, id)
	if err != nil || !ok || snap.Sequence != st.Sequence {
		return s, "", 0, errors.Join(errors.New("no snapshot at the park"), err)
	}
	s.snapshotBytes = len(snap.State)
	return s, id, st.Sequence, nil
}

// resumeOnce answers the gate the execution is parked on (its park is the
// event at sequence at), measures until the next park is durable, and then
// waits for that park's snapshot, so the next resume starts from it and
// does not wait for its write. It returns the latency, the time the Resume
// call took, and the new park's sequence.
func resumeOnce(ctx context.Context, rt *loom.Runtime, es *sqlite.EventStore, snaps *sqlite.SnapshotStore,
	id string, at int64, answer int) (lat, call time.Duration, park int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	sub, err := es.Subscribe(ctx, id, at+1)
	if err != nil {
		return 0, 0, 0, err
	}
	defer sub.Close()
	start := time.Now()
	ev := loom.ResumeEvent{EventType: resumeGate, Payload: json.RawMessage(strconv.Itoa(answer))}
	if err := rt.Resume(ctx, id, ev); err != nil {
		return 0, 0, 0, err
	}
	call = time.Since(start)
	for e := range sub.Events() {
		switch e.Type {
		case event.ExecutionSuspended:
			lat = time.Since(start)
			return lat, call, e.Sequence, awaitSnapshot(ctx, snaps, id, e.Sequence)
		case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
			return 0, 0, 0, fmt.Errorf("the probe ended (%s) instead of parking", e.Type)
		}
	}
	return 0, 0, 0, errors.Join(errors.New("the subscription ended before the park"), sub.Err(), ctx.Err())
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
// work does not run during the measured resumes: the journal saves the
// periodic snapshots (every defaultSnapshotEvery events) after their
// events are durable, possibly after the park. It returns once the park's
// snapshot and every periodic one up to it are stored — or, should the
// runtime skip some, once no snapshot was added for buildQuiet.
func awaitBuildSnapshots(ctx context.Context, snaps *sqlite.SnapshotStore, id string, park int64) error {
	want := (park+1)/defaultSnapshotEvery + 1 // periodic ones at k·N−1 <= park, and the park's
	if (park+1)%defaultSnapshotEvery == 0 {
		want-- // the park's sequence is also a periodic one
	}
	last, lastChange := -1, time.Now()
	for {
		seqs, err := snaps.ListSequences(ctx, id)
		if err != nil {
			return err
		}
		parked := len(seqs) > 0 && seqs[len(seqs)-1] == park
		if parked && (int64(len(seqs)) >= want || time.Since(lastChange) > buildQuiet) {
			return nil
		}
		if len(seqs) != last {
			last, lastChange = len(seqs), time.Now()
		}
		if err := pause(ctx, buildPoll); err != nil {
			return fmt.Errorf("snapshots of the build (%d of %d stored): %w", len(seqs), want, err)
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

// samplesMs renders latencies in milliseconds, in their order.
func samplesMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = millis(d)
	}
	return out
}
