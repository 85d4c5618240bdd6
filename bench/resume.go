package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// Workload d: the latency of resuming a parked execution whose log is
// large, against one whose log is small, with snapshots on (the SQLite
// SnapshotStore, SnapshotEvery at its default). Each log is built once, by
// the probe flow running N/2 trivial steps and then parking (probe.go); the
// latency is Resume → the next EXECUTION_SUSPENDED durable, as a subscriber
// to the log sees it. Each log is resumed along two paths:
//
//	warm  the runtime that parked the probe answers the Resume: the park is
//	      sticky (StickyParks default), so the flow goes on in place — no
//	      snapshot load, no replay — and parks again on the next gate.
//	cold  each repetition closes the runtime and the storage, reopens the
//	      SQLite file and builds a new runtime with the same flow, as a new
//	      process would; its Resume loads the latest (zstd) snapshot and the
//	      tail, then drives the flow from the top, which re-issues every
//	      step of the log (answered from the state, not run) before parking.
//
// A guard checks every resume took the path it is reported under: a warm
// one loads no snapshot, a cold one loads one, and neither runtime logs a
// warning (a snapshot ignored, a replay diverged).

// Limits of workload d.
const (
	// maxResumeEvents caps the size of a log the harness builds.
	maxResumeEvents = 10_000_000
	// maxResumeRepetitions caps the measured resumes per log and path (and
	// so the gates the probe flow passes).
	maxResumeRepetitions = 1000
	// resumeWarmups resumes run before the measured ones of each path and
	// are dropped.
	resumeWarmups = 1
	// resumeBuildTimeout bounds building one log; resumeTimeout one resume
	// and the snapshot that follows it.
	resumeBuildTimeout = 30 * time.Minute
	resumeTimeout      = 5 * time.Minute
)

// resumeDescription is workload d's description in the report.
const resumeDescription = "Resume → next park durable of a parked execution, large log vs small log, " +
	"SQLite snapshots (SnapshotEvery default); medians of the repetitions; each log is built once. " +
	"warm: the runtime that parked the execution answers its sticky park in place (StickyParks default): " +
	"no snapshot load, no replay; ratio, target (<= 2) and met judge this path. " +
	"cold: per repetition the runtime and the SQLite storage are closed and a new runtime (default config) " +
	"is built over the reopened file, as in a new process (the OS page cache, the Go heap and the zstd codec " +
	"stay warm); its Resume loads the latest zstd snapshot and the tail, then replays the flow from the top, " +
	"re-issuing every step of the log (smallSteps, largeSteps), so its cost grows with the log; coldRatio is " +
	"reported without a target (coldTarget null); coldOpenMs, reopening the storage and building the runtime, " +
	"is outside the latency"

// resumeRuns is what the measured resumes of one path on one log took.
type resumeRuns struct {
	latencies []time.Duration // Resume call → next park durable
	calls     []time.Duration // Resume call → its return (the answer durable)
	opens     []time.Duration // cold only: reopening the storage, building the runtime
}

// add keeps t unless resume i is a warm-up.
func (r *resumeRuns) add(i int, t resumeTiming) {
	if i < resumeWarmups {
		return
	}
	r.latencies = append(r.latencies, t.lat)
	r.calls = append(r.calls, t.call)
	if t.open > 0 {
		r.opens = append(r.opens, t.open)
	}
}

// resumeSample is what one log measured.
type resumeSample struct {
	steps             int           // the probe's steps: what a cold replay re-issues
	events            int64         // log length at the first park
	snapshotBytes     int           // the first park's snapshot as stored (zstd)
	snapshotJSONBytes int           // the same, decompressed
	build             time.Duration // Start → the first park durable
	settle            time.Duration // the park → the build's snapshots all stored
	warm, cold        resumeRuns
}

// resumeTiming is one resume.
type resumeTiming struct {
	lat, call time.Duration
	open      time.Duration // cold only
	park      int64         // the sequence of the park it ended in
	loads     int64         // snapshots the runtime loaded for it
}

// measureResume runs workload d: small and large are target log lengths,
// reps the measured resumes of each log along each path.
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
	ws, wl, cs, cl := summarize(s.warm), summarize(l.warm), summarize(s.cold), summarize(l.cold)
	r := &ResumeReport{
		Description: resumeDescription,
		SmallEvents: s.events, LargeEvents: l.events, SmallSteps: s.steps, LargeSteps: l.steps, Repetitions: reps,
		SmallSnapshotBytes: s.snapshotBytes, LargeSnapshotBytes: l.snapshotBytes,
		SmallSnapshotJSONBytes: s.snapshotJSONBytes, LargeSnapshotJSONBytes: l.snapshotJSONBytes,
		LargeBuildSec: round(l.build.Seconds()), LargeSettleSec: round(l.settle.Seconds()),

		WarmSmallMs: ws.median, WarmLargeMs: wl.median, WarmRatio: ratioOf(ws.median, wl.median),
		WarmSmallSamplesMs: ws.samples, WarmLargeSamplesMs: wl.samples,
		WarmSmallResumeCallMs: ws.call, WarmLargeResumeCallMs: wl.call,

		ColdSmallMs: cs.median, ColdLargeMs: cl.median, ColdRatio: ratioOf(cs.median, cl.median),
		ColdSmallSamplesMs: cs.samples, ColdLargeSamplesMs: cl.samples,
		ColdSmallResumeCallMs: cs.call, ColdLargeResumeCallMs: cl.call,
		ColdSmallOpenMs: cs.open, ColdLargeOpenMs: cl.open,

		Target: 2, Comparison: atMost,
	}
	r.Ratio = r.WarmRatio
	r.Met = ws.median > 0 && r.Ratio <= r.Target
	progress("workload d: warm resume %d events %.2f ms, %d events %.2f ms, ratio %.2f",
		r.SmallEvents, r.WarmSmallMs, r.LargeEvents, r.WarmLargeMs, r.WarmRatio)
	progress("workload d: cold resume %d events %.2f ms, %d events %.2f ms, ratio %.2f",
		r.SmallEvents, r.ColdSmallMs, r.LargeEvents, r.ColdLargeMs, r.ColdRatio)
	return r, nil
}

// pathSummary is one path's figures on one log, in milliseconds.
type pathSummary struct {
	samples            []float64 // the latencies, in the order measured
	median, call, open float64   // medians; open is 0 on the warm path
}

// summarize reduces runs to medians, listing the latencies first.
func summarize(r resumeRuns) pathSummary {
	med := func(ds []time.Duration) float64 { return millis(median(slices.Clone(ds))) }
	return pathSummary{samples: samplesMs(r.latencies), median: med(r.latencies), call: med(r.calls), open: med(r.opens)}
}

// ratioOf is large/small, 0 when small is not positive.
func ratioOf(small, large float64) float64 {
	if small <= 0 {
		return 0
	}
	return round(large / small)
}

// resumeLatencies builds a log of about n events on a fresh database file
// and parks it, then measures reps warm resumes by the runtime that built
// it and reps cold ones by new runtimes over the reopened file, each path
// after resumeWarmups unmeasured resumes.
func resumeLatencies(ctx context.Context, dir string, sync sqlite.Synchronous, n, reps int,
	progress func(string, ...any)) (resumeSample, error) {
	path := filepath.Join(dir, "d-"+strconv.Itoa(n)+".db")
	s, id, at, err := warmResumes(ctx, path, sync, n, reps, progress)
	if err != nil {
		return s, err
	}
	if s.cold, err = coldResumes(ctx, path, sync, id, at, s.events, reps); err != nil {
		return s, fmt.Errorf("workload d: cold resumes of the %d-event log: %w", n, err)
	}
	progress("workload d: %d events: %d warm and %d cold resumes measured", s.events, len(s.warm.latencies), len(s.cold.latencies))
	return s, nil
}

// warmResumes opens the database, builds the parked log and resumes it in
// place, then closes runtime and storage. It returns the execution id and
// the sequence of its last park.
func warmResumes(ctx context.Context, path string, sync sqlite.Synchronous, n, reps int,
	progress func(string, ...any)) (s resumeSample, id string, at int64, err error) {
	p, err := openProbe(path, sync)
	if err != nil {
		return s, "", 0, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	if s, id, at, err = buildParked(ctx, p, n, reps); err != nil {
		return s, "", 0, fmt.Errorf("workload d: building %d events: %w", n, err)
	}
	progress("workload d: built %d events in %v, its snapshots settled %v later (park snapshot %d bytes, %d decompressed)",
		s.events, s.build.Round(time.Millisecond), s.settle.Round(time.Millisecond), s.snapshotBytes, s.snapshotJSONBytes)
	labeled(ctx, "warm", s.events, func(ctx context.Context) {
		for i := range resumeWarmups + reps {
			var t resumeTiming
			if t, err = resumeOnce(ctx, p, id, at, i); err == nil && t.loads > 0 {
				err = errors.New("it loaded a snapshot: the sticky park was not answered in place")
			}
			if err != nil {
				err = fmt.Errorf("workload d: warm resume %d of the %d-event log: %w", i, n, err)
				return
			}
			at = t.park
			s.warm.add(i, t)
		}
	})
	return s, id, at, err
}

// coldResumes resumes the execution parked at sequence at with a new
// runtime over the reopened file each time. Its answers follow the warm
// ones'.
func coldResumes(ctx context.Context, path string, sync sqlite.Synchronous, id string, at, events int64, reps int) (
	runs resumeRuns, err error) {
	labeled(ctx, "cold", events, func(ctx context.Context) {
		for i := range resumeWarmups + reps {
			var t resumeTiming
			if t, err = coldResumeOnce(ctx, path, sync, id, at, resumeWarmups+reps+i); err != nil {
				err = fmt.Errorf("resume %d: %w", i, err)
				return
			}
			at = t.park
			runs.add(i, t)
		}
	})
	return runs, err
}

// coldResumeOnce is one cold resume: open the storage and a runtime, resume,
// wait for the next park and its snapshot, close both.
func coldResumeOnce(ctx context.Context, path string, sync sqlite.Synchronous, id string, at int64, answer int) (
	t resumeTiming, err error) {
	start := time.Now()
	p, err := openProbe(path, sync)
	if err != nil {
		return t, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	open := time.Since(start)
	if t, err = resumeOnce(ctx, p, id, at, answer); err == nil && t.loads == 0 {
		err = errors.New("it loaded no snapshot: a new runtime cannot have answered it in place")
	}
	t.open = open
	return t, err
}

// labeled runs measure under profiler labels (inherited by the goroutines
// the runtime and the storage start for it), so a CPU profile can keep the
// resumes apart from the build and the paths apart from each other:
// go tool pprof -tagfocus phase=resume -tagfocus path=cold.
func labeled(ctx context.Context, path string, events int64, measure func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("phase", "resume", "path", path, "log", "events-"+strconv.FormatInt(events, 10)), measure)
}

// resumeOnce answers the gate the execution is parked on (its park is the
// event at sequence at), measures until the next park is durable, and then
// waits for that park's snapshot, so the next resume starts from it and
// does not wait for its write. It counts the snapshots the runtime loaded
// meanwhile and fails if the runtime logged a warning.
func resumeOnce(ctx context.Context, p *probeRuntime, id string, at int64, answer int) (resumeTiming, error) {
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	sub, err := p.events.Subscribe(ctx, id, at+1)
	if err != nil {
		return resumeTiming{}, err
	}
	defer sub.Close()
	loads := p.loads.loads.Load()
	start := time.Now()
	ev := loom.ResumeEvent{EventType: resumeGate, Payload: json.RawMessage(strconv.Itoa(answer))}
	if err := p.rt.Resume(ctx, id, ev); err != nil {
		return resumeTiming{}, err
	}
	call := time.Since(start)
	for e := range sub.Events() {
		switch e.Type {
		case event.ExecutionSuspended:
			t := resumeTiming{lat: time.Since(start), call: call, park: e.Sequence}
			if err := awaitSnapshot(ctx, p.snaps, id, e.Sequence); err != nil {
				return t, err
			}
			t.loads = p.loads.loads.Load() - loads
			return t, p.healthy()
		case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
			return resumeTiming{}, fmt.Errorf("the probe ended (%s) instead of parking", e.Type)
		}
	}
	return resumeTiming{}, errors.Join(errors.New("the subscription ended before the park"), sub.Err(), ctx.Err())
}

// samplesMs renders latencies in milliseconds, in their order.
func samplesMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = millis(d)
	}
	return out
}
