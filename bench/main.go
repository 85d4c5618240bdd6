// Command bench runs Loom's whole-workload benchmarks on SQLite and prints
// one JSON document to stdout (progress goes to stderr):
//
//	go run ./bench [-duration 5s] [-workloads a,b,c,d] [-sync full|normal] [-db-dir DIR]
//	               [-resume-small 100] [-resume-large 100000] [-resume-reps 5] [-cpuprofile-dir DIR]
//
// Every workload is reported beside a raw driver baseline measured in the
// same process during the same run, as a ratio, because absolute rates on
// shared machines drift (DESIGN.md, Performance). A baseline is measured
// right before and right after the workload judged against it and the two
// samples are averaged, so drift during the run shows in the samples
// rather than in the ratio:
//
//	a  10-step flows of trivial steps, sequential, StepDurable: workflows/s
//	   against raw one-row-per-commit rows/s ÷ the Append calls (durable
//	   commits) a workflow makes, counted by a decorator; target ≥ 0.5
//	b  the same in WriteBehind mode: workflows/s against a's; target ≥ 5
//	c  32 workflows in flight, WriteBehind: events/s against raw
//	   100-rows-per-transaction rows/s; target ≥ 0.4
//	d  Resume → next park of a parked execution with a large log (100k
//	   events) against a small one (100), with snapshots; median of several
//	   repetitions. warm: the runtime that parked it answers its sticky
//	   park in place (StickyParks default); target ≤ 2. cold: a new runtime
//	   over the reopened SQLite file loads the latest snapshot and replays
//	   the flow, as a new process would; its ratio is reported, no target
//
// Every throughput workload runs on its own fresh SQLite file with the
// plugin's defaults (event store behind a counting decorator, snapshot
// store), after a short warm-up. -cpuprofile-dir writes one CPU profile per
// workload; workload d labels its resumes (pprof -tagfocus phase=resume,
// and path=warm or path=cold).
//
// Fold throughput and the SQLite append paths have Go benchmarks in their
// packages (fold, plugins/sqlite); this harness does not repeat them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/loom-kernel/loom/plugins/sqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// allWorkloads lists the workloads in the order they run.
var allWorkloads = []string{"a", "b", "c", "d"}

// flags are the command line, parsed and checked.
type flags struct {
	duration    time.Duration
	dbDir       string
	workloads   []string
	sync        sqlite.Synchronous
	resumeSmall int
	resumeLarge int
	resumeReps  int
	profileDir  string
}

// parseFlags reads args; every value is checked against its limit.
func parseFlags(args []string, stderr io.Writer) (flags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	var workloads, sync string
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "measured time of each throughput workload; each raw baseline sample takes half of it")
	fs.StringVar(&f.dbDir, "db-dir", "", "directory for the run's database files, in a fresh subdirectory removed at the end "+
		"(default the system temp dir); the file system decides the fsync cost")
	fs.StringVar(&workloads, "workloads", strings.Join(allWorkloads, ","), "comma-separated workloads to run")
	fs.StringVar(&sync, "sync", "full", "SQLite synchronous level of the store and the raw baselines: full or normal")
	fs.IntVar(&f.resumeSmall, "resume-small", 100, "workload d: events of the small log")
	fs.IntVar(&f.resumeLarge, "resume-large", 100_000, "workload d: events of the large log")
	fs.IntVar(&f.resumeReps, "resume-reps", 5, "workload d: measured resumes of each log along each path, warm and cold (the median is reported)")
	fs.StringVar(&f.profileDir, "cpuprofile-dir", "", "write one CPU profile per workload (a.prof … d.prof) into this directory")
	if err := fs.Parse(args); err != nil {
		return flags{}, err
	}
	if fs.NArg() > 0 {
		return flags{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch sync {
	case "full":
		f.sync = sqlite.SyncFull
	case "normal":
		f.sync = sqlite.SyncNormal
	default:
		return flags{}, fmt.Errorf("-sync %q: want full or normal", sync)
	}
	for _, w := range strings.Split(workloads, ",") {
		w = strings.TrimSpace(w)
		if !slices.Contains(allWorkloads, w) {
			return flags{}, fmt.Errorf("-workloads: unknown workload %q (want a subset of %s)", w, strings.Join(allWorkloads, ","))
		}
		if !slices.Contains(f.workloads, w) {
			f.workloads = append(f.workloads, w)
		}
	}
	slices.SortFunc(f.workloads, func(x, y string) int { return slices.Index(allWorkloads, x) - slices.Index(allWorkloads, y) })
	switch {
	case f.duration <= 0:
		return flags{}, fmt.Errorf("-duration %v: must be positive", f.duration)
	case f.resumeSmall < 4 || f.resumeLarge <= f.resumeSmall || f.resumeLarge > maxResumeEvents:
		return flags{}, fmt.Errorf("-resume-small %d, -resume-large %d: want 4 <= small < large <= %d",
			f.resumeSmall, f.resumeLarge, maxResumeEvents)
	case f.resumeReps < 1 || f.resumeReps > maxResumeRepetitions:
		return flags{}, fmt.Errorf("-resume-reps %d: want 1..%d", f.resumeReps, maxResumeRepetitions)
	}
	return f, nil
}

// run is the whole command: parse, measure, print. The test calls it
// in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", a...)
	}
	dir, err := os.MkdirTemp(f.dbDir, "loom-bench-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()

	rep := Report{Machine: currentMachine(), Config: RunConfig{DurationMs: f.duration.Milliseconds(),
		Synchronous: f.sync.String(), Workloads: f.workloads, DBDir: dir}}
	progress("bench: %s/%s, %d CPUs, %s; databases in %s", rep.Machine.GOOS, rep.Machine.GOARCH,
		rep.Machine.CPUs, rep.Machine.Go, dir)
	raw, err := openRawBaselines(ctx, dir, f.sync, f.duration, progress)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, raw.Close()) }()
	if err := runWorkloads(ctx, f, dir, raw, &rep.Workloads, progress); err != nil {
		return err
	}
	if rep.Raw, err = raw.report(ctx); err != nil {
		return err
	}
	return writeReport(stdout, rep)
}

// runWorkloads runs the selected workloads and judges each against its
// baseline, measured around it. b is judged against a, so selecting b runs
// a as well.
func runWorkloads(ctx context.Context, f flags, dir string, raw *rawBaselines, w *WorkloadReports,
	progress func(string, ...any)) error {
	selected := func(w string) bool { return slices.Contains(f.workloads, w) }
	throughput := func(spec throughputSpec, out **ThroughputReport) func() error {
		return func() error {
			return profiled(f.profileDir, spec.name, func() (err error) {
				*out, err = runThroughput(ctx, dir, f.sync, spec, f.duration, progress)
				return err
			})
		}
	}
	if selected("a") || selected("b") {
		if !selected("a") {
			progress("workload b is judged against a: running a as well")
		}
		samples, err := raw.around(ctx, 1, throughput(specA, &w.A))
		if err != nil {
			return err
		}
		// The ceiling of a lone sequential appender: the raw commit rate
		// shared out over the durable commits one workflow makes.
		ceiling := mean(samples) / w.A.AppendsPerWorkflow
		w.A.judge("rawOneRowPerCommitPerSec / appendsPerWorkflow", ceiling, samples, w.A.WorkflowsPerSec, 0.5)
	}
	if selected("b") {
		if err := throughput(specB, &w.B)(); err != nil {
			return err
		}
		a := w.A.WorkflowsPerSec
		w.B.judge("a.workflowsPerSec", a, []float64{a}, w.B.WorkflowsPerSec, 5)
	}
	if selected("c") {
		samples, err := raw.around(ctx, rawRowsPerBatch, throughput(specC, &w.C))
		if err != nil {
			return err
		}
		w.C.judge("rawHundredRowsPerTxPerSec", mean(samples), samples, w.C.EventsPerSec, 0.4)
	}
	if selected("d") {
		return profiled(f.profileDir, "d", func() (err error) {
			w.D, err = measureResume(ctx, dir, f.sync, f.resumeSmall, f.resumeLarge, f.resumeReps, progress)
			return err
		})
	}
	return nil
}

// profiled runs measure, under a CPU profile written to dir/name.prof
// when dir is set.
func profiled(dir, name string, measure func() error) error {
	if dir == "" {
		return measure()
	}
	out, err := os.Create(filepath.Join(dir, name+".prof"))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		return errors.Join(err, out.Close())
	}
	err = measure()
	pprof.StopCPUProfile()
	return errors.Join(err, out.Close())
}
