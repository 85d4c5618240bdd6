package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// stepsPerFlow is the number of trivial steps of the throughput workloads'
// flow.
const stepsPerFlow = 10

// tenStepsFlowID names the throughput workloads' flow.
const tenStepsFlowID = "ten-steps"

// Limits of a throughput run: each keeps a bound on memory or on a wait.
const (
	// maxLatencySamples caps the latencies one run keeps; workflows past it
	// still count in the rates but not in the percentiles.
	maxLatencySamples = 1 << 20
	// workflowTimeout bounds one workflow's Start → WaitForCompletion.
	workflowTimeout = time.Minute
	// maxWarmup caps the warm-up before each measured run.
	maxWarmup = time.Second
)

// trivialStep adds one to its input: a step whose effect costs nothing, so
// the workload measures the runtime and the store.
var trivialStep = loom.NewStep("step", func(_ context.Context, n int) (int, error) { return n + 1, nil })

// tenStepsFlow runs trivialStep stepsPerFlow times (ids step#0…step#9) and
// returns the last output, stepsPerFlow for an input of 0.
func tenStepsFlow() *loom.Flow {
	return loom.NewFlow(tenStepsFlowID, func(ctx *loom.Context, n int) (int, error) {
		for i := range stepsPerFlow {
			var err error
			if n, err = loom.Run(ctx, trivialStep.Iter(i), n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}

// throughputSpec describes one whole-workflow workload.
type throughputSpec struct {
	name        string
	description string
	durability  loom.Durability
	workers     int // goroutines, each starting a flow and waiting for it
}

var (
	specA = throughputSpec{"a", "10-step flows, sequential, StepDurable: every step completion durable before the next step",
		loom.StepDurable, 1}
	specB = throughputSpec{"b", "10-step flows, sequential, WriteBehind (the default)", loom.WriteBehind, 1}
	specC = throughputSpec{"c", "10-step flows, 32 in flight, WriteBehind", loom.WriteBehind, 32}
)

// throughputRun is what one measured run counted.
type throughputRun struct {
	workflows int64
	elapsed   time.Duration
	latencies []time.Duration
}

// benchStore is one workload's fresh storage, with the plugin's defaults.
type benchStore struct {
	events       store.EventStore
	snapshots    store.SnapshotStore
	transactions func() int64 // the writer's committed transactions so far
	close        func() error // closes it and removes what it wrote
}

// storeOpener opens a fresh benchStore for the workload named name.
type storeOpener func(ctx context.Context, name string) (benchStore, error)

// sqliteStores opens each workload's store on its own file in dir.
func sqliteStores(dir string, sync sqlite.Synchronous) storeOpener {
	return func(_ context.Context, name string) (benchStore, error) {
		db, err := sqlite.Open(filepath.Join(dir, name+".db"), sqlite.WithSynchronous(sync))
		if err != nil {
			return benchStore{}, err
		}
		return benchStore{events: db.EventStore(), snapshots: db.SnapshotStore(),
			transactions: func() int64 { return db.WriteStats().Transactions }, close: db.Close}, nil
	}
}

// runThroughput runs spec for d on a fresh store, after a short warm-up,
// and reports its rates and latencies. The ratio is left to the caller,
// which knows the baselines.
func runThroughput(ctx context.Context, open storeOpener, spec throughputSpec, d time.Duration,
	progress func(string, ...any)) (_ *ThroughputReport, err error) {
	st, err := open(ctx, spec.name)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	events := &countingStore{EventStore: st.events}
	rt, err := loom.New(loom.Config{Events: events, Snapshots: st.snapshots, Recovery: loom.Recovery{Disabled: true},
		Flows: []*loom.Flow{tenStepsFlow()}, Durability: spec.durability})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()

	if _, err := driveWorkflows(ctx, rt, spec.workers, min(d/10, maxWarmup)); err != nil {
		return nil, fmt.Errorf("workload %s: warm-up: %w", spec.name, err)
	}
	before, txBefore := events.read(), st.transactions()
	run, err := driveWorkflows(ctx, rt, spec.workers, d)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", spec.name, err)
	}
	c, txs := events.read().minus(before), st.transactions()-txBefore
	if run.workflows == 0 {
		return nil, fmt.Errorf("workload %s: no workflow completed in %v", spec.name, d)
	}
	n := float64(run.workflows)
	r := &ThroughputReport{
		Description:             spec.description,
		Workers:                 spec.workers,
		Workflows:               run.workflows,
		WorkflowsPerSec:         round(perSecond(run.workflows, run.elapsed)),
		EventsPerSec:            round(perSecond(c.events, run.elapsed)),
		EventsPerWorkflow:       round(float64(c.events) / n),
		AppendsPerWorkflow:      round(float64(c.appends) / n),
		TransactionsPerWorkflow: round(float64(txs) / n),
		P50Ms:                   millis(percentile(run.latencies, 50)),
		P99Ms:                   millis(percentile(run.latencies, 99)),
	}
	progress("workload %s: %d workflows, %.1f workflows/s, %.0f events/s, %.2f appends/workflow, p50 %.2f ms, p99 %.2f ms",
		spec.name, r.Workflows, r.WorkflowsPerSec, r.EventsPerSec, r.AppendsPerWorkflow, r.P50Ms, r.P99Ms)
	return r, nil
}

// driveWorkflows runs workers goroutines that each start a flow and wait
// for its completion, again and again, until d has passed; the workflows in
// flight then finish and count. elapsed runs until the last one ends.
func driveWorkflows(ctx context.Context, rt *loom.Runtime, workers int, d time.Duration) (throughputRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		run  throughputRun
		errs = make([]error, workers)
		wg   sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for time.Since(start) < d && ctx.Err() == nil {
				t0 := time.Now()
				if err := oneWorkflow(ctx, rt); err != nil {
					errs[w] = err
					cancel()
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			run.workflows += int64(len(lat))
			room := max(maxLatencySamples-len(run.latencies), 0)
			run.latencies = append(run.latencies, lat[:min(room, len(lat))]...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	return run, errors.Join(errs...)
}

// oneWorkflow starts a ten-step flow and waits until it completed with the
// expected output.
func oneWorkflow(ctx context.Context, rt *loom.Runtime) error {
	ctx, cancel := context.WithTimeout(ctx, workflowTimeout)
	defer cancel()
	id, err := rt.Start(ctx, tenStepsFlowID, 0)
	if err != nil {
		return err
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		return err
	}
	if res.Status != fold.StatusCompleted || string(res.Output) != strconv.Itoa(stepsPerFlow) {
		return fmt.Errorf("execution %s ended %s with output %s", id, res.Status, res.Output)
	}
	return nil
}
