// Command bench runs Loom's whole-workload benchmarks on SQLite, or on
// PostgreSQL with -postgres, and prints one JSON document to stdout
// (progress goes to stderr):
//
//	go run ./bench [-duration 5s] [-workloads a,b,c,d,e] [-sync full|normal] [-db-dir DIR]
//	               [-resume-small 100] [-resume-large 100000] [-resume-reps 5]
//	               [-agent-small 20] [-agent-large 200] [-agent-reps 5] [-cpuprofile-dir DIR]
//	               [-scale-small 1000] [-scale-large 1000000]
//	               [-fanout-small 100] [-fanout-large 1000] [-fanout-reps 5]
//	               [-inspect-small 100] [-inspect-large 100000]
//	go run ./bench -postgres DSN [-duration 5s] [-workloads a,b,c,f,g,h] [-cpuprofile-dir DIR]
//	               [-scale-small 1000] [-scale-large 100000]
//	               [-fanout-small 100] [-fanout-large 1000] [-fanout-reps 5]
//	               [-inspect-small 100] [-inspect-large 100000]
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
//	e  agent turns: agent.Run against the Anthropic fake server on loopback
//	   (plugins/anthropic/anthropictest), a fresh SQLite file per run,
//	   StepDurable; T turns of one model call answered with one tool call
//	   (a tool step answering ~2 KiB of JSON), then an answer turn, at two
//	   sizes (-agent-small, -agent-large tool turns), median of -agent-reps
//	   runs. Per turn (model call): a, the agent's wall time; b, the same
//	   requests sent by provider.Complete alone to the fake server; c, the
//	   raw one-row-per-commit time (measured around each size) times the
//	   Append calls per turn. overhead = a − b − c, judged at the worse size
//	   against 5 % of a nominal 50 ms model call (2.5 ms); a/b and the
//	   large/small per-turn ratios (linearity) are reported beside it. Then,
//	   per ToolLog mode (full, lean), runs of the large size park after the
//	   agent: the log's envelope bytes per turn (event.Encode, by event
//	   kind) and the final state's fold.Encode size, lean/full judged
//	   against 0.4; and a new runtime over the reopened file resumes each
//	   one, the agent re-running from the log, which fails the run should
//	   the fake server get a single request; replay time over the live
//	   run's is reported, no target
//	f  parked executions at scale (scale.go), run only when -workloads
//	   names it: -scale-small and -scale-large executions parked on a gate,
//	   each population measured by a fresh runtime over the reopened
//	   storage: its size, the recovery pass, heap and RSS, paging the
//	   status index and the executions, and cold Resume → completion of
//	   random parked ones, whose median large/small is judged against 2.
//	   On PostgreSQL too, each population in a schema of the run
//	g  fan-out (fanout.go), run only when -workloads names it: at two sizes
//	   (-fanout-small, -fanout-large children), on a fresh store per size
//	   and one runtime (Features.Children, WriteBehind), N independent
//	   Starts of a one-step flow then waits for all to complete, against
//	   one parent that spawns N children of that flow and awaits them with
//	   AwaitChildren; median of -fanout-reps repetitions. fan-out/starts at
//	   the worse size is judged against 1.5; large/small per child
//	   (linearity) is reported beside it. On PostgreSQL too, each size in a
//	   schema of the run
//	h  the inspector's execution list (inspectlist.go), run only when
//	   -workloads names it: two populations (-inspect-small,
//	   -inspect-large) built through the runtime, a third parked, a third
//	   completed, a third failed; over each reopened storage an
//	   inspect.Inspector on loopback HTTP answers its first page (newest
//	   first, with the counts by status), the next page, a status filter
//	   and an id prefix, medians of 25 requests, beside the store's own
//	   listing; the first page large/small is judged against 2. On
//	   PostgreSQL too
//
// Every throughput workload, and every run of workload e, runs on its own
// fresh SQLite file with the plugin's defaults (event store behind a
// counting decorator, snapshot store), after a short warm-up.
//
// With -postgres DSN, workloads a, b and c (the default set) run on
// PostgreSQL instead, each in a fresh schema (loombench_<run hex>_<name>)
// through plugins/postgres with its defaults, and the raw baselines insert
// with pgx into an events-shaped table in a schema of their own: one row
// per commit and 100 rows per transaction on one connection, plus one row
// per commit on each of 32 connections at once. c is judged against the
// 100-row rate and also reported beside the 32-connection one, with no
// target. Every schema the run created is dropped at its end, also on
// failure. Workloads f, g and h run there too when named. Workloads d and e are SQLite-only (they reopen a database file
// as a new process would) and are refused with -postgres, as are the
// SQLite flags. -cpuprofile-dir writes one CPU profile per workload
// (a.prof … h.prof); workload d labels its resumes (pprof -tagfocus
// phase=resume, and path=warm or path=cold).
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
	"strconv"
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
var allWorkloads = []string{"a", "b", "c", "d", "e", "f", "g", "h"}

// optInWorkloads run only when -workloads names them: f builds a million
// executions and takes minutes; g is the child-flow fan-out, measured apart
// from the default set; h builds 100,000 executions for the inspector.
var optInWorkloads = []string{"f", "g", "h"}

// postgresWorkloads are those that run on PostgreSQL, the default set with
// -postgres.
var postgresWorkloads = []string{"a", "b", "c"}

// flags are the command line, parsed and checked.
type flags struct {
	duration    time.Duration
	dbDir       string
	workloads   []string
	sync        sqlite.Synchronous
	resumeSmall int
	resumeLarge int
	resumeReps  int
	agentSmall  int
	agentLarge  int
	agentReps   int
	profileDir  string
	postgres    string // DSN; empty for SQLite
	scaleSmall  int
	scaleLarge  int
	fanSmall    int
	fanLarge    int
	fanReps     int
	inspSmall   int
	inspLarge   int
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
	defaults := slices.DeleteFunc(slices.Clone(allWorkloads), func(w string) bool { return slices.Contains(optInWorkloads, w) })
	fs.StringVar(&workloads, "workloads", strings.Join(defaults, ","), "comma-separated workloads to run (of "+
		strings.Join(allWorkloads, ",")+"; "+strings.Join(optInWorkloads, ",")+" only when named)")
	fs.StringVar(&sync, "sync", "full", "SQLite synchronous level of the store and the raw baselines: full or normal")
	fs.IntVar(&f.resumeSmall, "resume-small", 100, "workload d: events of the small log")
	fs.IntVar(&f.resumeLarge, "resume-large", 100_000, "workload d: events of the large log")
	fs.IntVar(&f.resumeReps, "resume-reps", 5, "workload d: measured resumes of each log along each path, warm and cold (the median is reported)")
	fs.IntVar(&f.agentSmall, "agent-small", 20, "workload e: tool turns of the small agent run")
	fs.IntVar(&f.agentLarge, "agent-large", 200, "workload e: tool turns of the large agent run (also of the log and replay runs)")
	fs.IntVar(&f.agentReps, "agent-reps", 5, "workload e: measured runs of each size, and log runs of each ToolLog mode (the median is reported)")
	fs.IntVar(&f.scaleSmall, "scale-small", defaultScaleSmall, "workload f: parked executions of the small population")
	fs.IntVar(&f.scaleLarge, "scale-large", defaultScaleLarge, "workload f: parked executions of the large population "+
		"(default "+strconv.Itoa(pgScaleLarge)+" with -postgres)")
	fs.IntVar(&f.fanSmall, "fanout-small", 100, "workload g: children of the small fan-out")
	fs.IntVar(&f.fanLarge, "fanout-large", 1000, "workload g: children of the large fan-out")
	fs.IntVar(&f.fanReps, "fanout-reps", 5, "workload g: measured repetitions of each size (the median is reported)")
	fs.IntVar(&f.inspSmall, "inspect-small", defaultInspectSmall, "workload h: executions of the small population")
	fs.IntVar(&f.inspLarge, "inspect-large", defaultInspectLarge, "workload h: executions of the large population")
	fs.StringVar(&f.profileDir, "cpuprofile-dir", "", "write one CPU profile per workload (a.prof … h.prof) into this directory")
	fs.StringVar(&f.postgres, "postgres", "", "run workloads a, b, c on PostgreSQL at this DSN, in fresh schemas dropped at the end "+
		"(default: SQLite)")
	if err := fs.Parse(args); err != nil {
		return flags{}, err
	}
	if fs.NArg() > 0 {
		return flags{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.postgres != "" {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		for _, name := range []string{"sync", "db-dir", "resume-small", "resume-large", "resume-reps", "agent-small", "agent-large", "agent-reps"} {
			if set[name] {
				return flags{}, fmt.Errorf("-%s: SQLite only, not with -postgres", name)
			}
		}
		if !set["workloads"] {
			workloads = strings.Join(postgresWorkloads, ",")
		}
		if !set["scale-large"] {
			f.scaleLarge = pgScaleLarge
		}
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
	for _, w := range []string{"d", "e"} {
		if f.postgres != "" && slices.Contains(f.workloads, w) {
			return flags{}, fmt.Errorf("-workloads %s: workload %s runs on SQLite only, not with -postgres", w, w)
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
	case f.agentSmall < 1 || f.agentLarge <= f.agentSmall || f.agentLarge > maxAgentTurns:
		return flags{}, fmt.Errorf("-agent-small %d, -agent-large %d: want 1 <= small < large <= %d",
			f.agentSmall, f.agentLarge, maxAgentTurns)
	case f.agentReps < 1 || f.agentReps > maxAgentRepetitions:
		return flags{}, fmt.Errorf("-agent-reps %d: want 1..%d", f.agentReps, maxAgentRepetitions)
	case f.scaleSmall < minScaleExecutions || f.scaleLarge <= f.scaleSmall || f.scaleLarge > maxScaleExecutions:
		return flags{}, fmt.Errorf("-scale-small %d, -scale-large %d: want %d <= small < large <= %d",
			f.scaleSmall, f.scaleLarge, minScaleExecutions, maxScaleExecutions)
	case f.fanSmall < 1 || f.fanLarge <= f.fanSmall || f.fanLarge > maxFanOutChildren:
		return flags{}, fmt.Errorf("-fanout-small %d, -fanout-large %d: want 1 <= small < large <= %d",
			f.fanSmall, f.fanLarge, maxFanOutChildren)
	case f.fanReps < 1 || f.fanReps > maxFanOutRepetitions:
		return flags{}, fmt.Errorf("-fanout-reps %d: want 1..%d", f.fanReps, maxFanOutRepetitions)
	case f.inspSmall < 1 || f.inspLarge <= f.inspSmall || f.inspLarge > maxInspectLarge:
		return flags{}, fmt.Errorf("-inspect-small %d, -inspect-large %d: want 1 <= small < large <= %d",
			f.inspSmall, f.inspLarge, maxInspectLarge)
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
	rep := Report{Machine: currentMachine(), Config: RunConfig{DurationMs: f.duration.Milliseconds(), Workloads: f.workloads}}
	var (
		raw  *rawBaselines
		open storeOpener
		dir  string
		pg   *pgRun
	)
	if f.postgres == "" {
		if dir, err = os.MkdirTemp(f.dbDir, "loom-bench-"); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
		rep.Config.Store, rep.Config.Synchronous, rep.Config.DBDir = "sqlite", f.sync.String(), dir
		progress("bench: %s/%s, %d CPUs, %s; databases in %s", rep.Machine.GOOS, rep.Machine.GOARCH,
			rep.Machine.CPUs, rep.Machine.Go, dir)
		raw, err = openRawBaselines(ctx, dir, f.sync, f.duration, progress)
		open = sqliteStores(dir, f.sync)
	} else {
		if pg, err = openPGRun(ctx, f.postgres); err != nil {
			return err
		}
		rep.Config.Store, rep.Config.Synchronous = "postgres", pg.syncCommit
		progress("bench: %s/%s, %d CPUs, %s; PostgreSQL %s (fsync %s, synchronous_commit %s), schemas %s*",
			rep.Machine.GOOS, rep.Machine.GOARCH, rep.Machine.CPUs, rep.Machine.Go,
			pg.config.ServerVersion, pg.config.Fsync, pg.syncCommit, pg.prefix)
		raw, err = pg.baselines(ctx, f.duration, progress)
		open = pg.stores()
	}
	if err != nil {
		return err
	}
	// Closing the raw baselines drops the PostgreSQL run's schemas.
	defer func() { err = errors.Join(err, raw.Close()) }()
	if err := runWorkloads(ctx, f, dir, open, raw, &rep.Workloads, progress); err != nil {
		return err
	}
	if slices.Contains(f.workloads, "f") {
		err := profiled(f.profileDir, "f", func() (err error) {
			rep.Workloads.F, err = measureScale(ctx, scaleStorageFor("f", dir, f.sync, pg), f.scaleSmall, f.scaleLarge, progress)
			return err
		})
		if err != nil {
			return err
		}
	}
	if slices.Contains(f.workloads, "g") {
		err := profiled(f.profileDir, "g", func() (err error) {
			rep.Workloads.G, err = measureFanOut(ctx, open, f.fanSmall, f.fanLarge, f.fanReps, progress)
			return err
		})
		if err != nil {
			return err
		}
	}
	if slices.Contains(f.workloads, "h") {
		err := profiled(f.profileDir, "h", func() (err error) {
			rep.Workloads.H, err = measureInspectList(ctx, scaleStorageFor("h", dir, f.sync, pg), f.inspSmall, f.inspLarge, progress)
			return err
		})
		if err != nil {
			return err
		}
	}
	if rep.Raw, err = raw.report(ctx); err != nil {
		return err
	}
	if pg != nil {
		rep.Config.Postgres = pg.postgresConfig()
	}
	return writeReport(stdout, rep)
}

// runWorkloads runs the selected workloads and judges each against its
// baseline, measured around it. b is judged against a, so selecting b runs
// a as well.
func runWorkloads(ctx context.Context, f flags, dir string, open storeOpener, raw *rawBaselines, w *WorkloadReports,
	progress func(string, ...any)) error {
	selected := func(w string) bool { return slices.Contains(f.workloads, w) }
	throughput := func(spec throughputSpec, out **ThroughputReport) func() error {
		return func() error {
			return profiled(f.profileDir, spec.name, func() (err error) {
				*out, err = runThroughput(ctx, open, spec, f.duration, progress)
				return err
			})
		}
	}
	if selected("a") || selected("b") {
		if !selected("a") {
			progress("workload b is judged against a: running a as well")
		}
		samples, err := raw.around(ctx, throughput(specA, &w.A), rawOne)
		if err != nil {
			return err
		}
		// The ceiling of a lone sequential appender: the raw commit rate
		// shared out over the durable commits one workflow makes.
		ceiling := mean(samples[0]) / w.A.AppendsPerWorkflow
		w.A.judge("rawOneRowPerCommitPerSec / appendsPerWorkflow", ceiling, samples[0], w.A.WorkflowsPerSec, 0.5)
	}
	if selected("b") {
		if err := throughput(specB, &w.B)(); err != nil {
			return err
		}
		a := w.A.WorkflowsPerSec
		w.B.judge("a.workflowsPerSec", a, []float64{a}, w.B.WorkflowsPerSec, 5)
	}
	if selected("c") {
		kinds := []rawKind{rawHundred}
		if raw.measures(rawThirtyTwo) {
			kinds = append(kinds, rawThirtyTwo)
		}
		samples, err := raw.around(ctx, throughput(specC, &w.C), kinds...)
		if err != nil {
			return err
		}
		w.C.judge("rawHundredRowsPerTxPerSec", mean(samples[0]), samples[0], w.C.EventsPerSec, 0.4)
		if len(samples) > 1 {
			v := mean(samples[1])
			w.C.ThirtyTwoConnsBaselineValue, w.C.ThirtyTwoConnsBaselineSamples = round(v), samples[1]
			if v > 0 {
				w.C.ThirtyTwoConnsRatio = round(w.C.EventsPerSec / v)
			}
		}
	}
	if selected("d") {
		err := profiled(f.profileDir, "d", func() (err error) {
			w.D, err = measureResume(ctx, dir, f.sync, f.resumeSmall, f.resumeLarge, f.resumeReps, progress)
			return err
		})
		if err != nil {
			return err
		}
	}
	if selected("e") {
		return profiled(f.profileDir, "e", func() (err error) {
			w.E, err = measureAgent(ctx, dir, f.sync, f.agentSmall, f.agentLarge, f.agentReps, raw, progress)
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
