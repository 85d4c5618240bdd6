package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Workload f: many parked executions in one store. Two populations, small
// and large, are built through the real runtime over the plugin's Storage
// preset: scaleBuildWorkers goroutines start the parked flow (one trivial
// step, then a gate) under ids scaleID(0…n-1) and wait for each park,
// WriteBehind, sticky parks at their default cap. Once both are built and
// closed, each is measured by a fresh runtime over the reopened storage,
// as a new process would see it:
//
//	size      the storage (SQLite: main file + WAL after a checkpoint;
//	          PostgreSQL: the schema's tables with their indexes and TOAST)
//	recovery  Runtime.Recover, what the first automatic pass does, timed;
//	          it must re-drive nothing and commit nothing; then the walk of
//	          the status index a periodic pass makes
//	memory    Go heap in use and process RSS after the pass, after a GC
//	          that returns what it can to the OS, beside the same reading
//	          taken just before the storage was opened
//	listing   store.StatusIndex.ListUnfinished and ListExecutions: the
//	          first scaleFirstPages pages of scalePageSize, and one page
//	          from 90 % into the ids
//	resume    Resume + WaitForCompletion of distinct random parked
//	          executions (seeded), one at a time: cold, the snapshot load
//	          and the replay of one step, since this runtime parked none
//
// The large/small ratio of the median resume is judged against 2; the RSS
// and heap ratios are reported beside it (flat means no memory per parked
// execution).

// Limits of workload f.
const (
	// minScaleExecutions and maxScaleExecutions bound a population.
	minScaleExecutions = 10
	maxScaleExecutions = 10_000_000
	// defaultScaleSmall and defaultScaleLarge are the flags' defaults;
	// on PostgreSQL the large one is pgScaleLarge.
	defaultScaleSmall = 1000
	defaultScaleLarge = 1_000_000
	pgScaleLarge      = 100_000
	// scaleBuildWorkers is the executions in flight during a build.
	scaleBuildWorkers = 64
	// maxScaleResumes caps the measured resumes per size (at most half the
	// small population); scaleResumeWarmups more run first, unmeasured.
	maxScaleResumes    = 200
	scaleResumeWarmups = 5
	// scalePageSize, scaleFirstPages and scaleDeepReads shape the listing:
	// the first pages read in a row, then one deep page read again and
	// again (the median is reported).
	scalePageSize   = 100
	scaleFirstPages = 10
	scaleDeepReads  = 5
	// scaleIndexPage is the page of the runtime's own recovery pass.
	scaleIndexPage = 256
	// scaleSeed seeds the choice of the resumed executions (with the size),
	// so a run resumes the same ones again.
	scaleSeed = 1
	// scaleProgressEvery is how often a build reports its progress.
	scaleProgressEvery = 10 * time.Second
	// Timeouts: one build, one recovery pass, one resume.
	scaleBuildTimeout    = 3 * time.Hour
	scaleRecoveryTimeout = time.Hour
	scaleResumeTimeout   = time.Minute
)

const (
	scaleFlowID = "parked"
	scaleGate   = "go"
	// scaleStickyParks is the StickyParks of every runtime of workload f:
	// 0, loom.Config's default (256).
	scaleStickyParks = 0
	// scaleStickyCap is what that default means, for the report.
	scaleStickyCap = 256
)

// scaleDescription is workload f's description in the report.
const scaleDescription = "Parked executions in one store, a small and a large population, each built through the runtime " +
	"over the plugin's Storage preset (a flow running one trivial step, then parking on a gate; buildWorkers in flight, " +
	"WriteBehind, StickyParks default) and measured by a fresh runtime over the reopened storage: storage size " +
	"(SQLite main file + WAL after a TRUNCATE checkpoint; PostgreSQL pg_total_relation_size of the schema's tables); " +
	"Runtime.Recover timed (what the first automatic pass does: it pages the status index and loads each parked " +
	"execution's snapshot to look for a select park's unheard message) and the index walk of a periodic pass; heap in use " +
	"and VmRSS after the pass and a GC, beside the same reading before opening; the first pages and a page 90% deep of " +
	"ListUnfinished and ListExecutions; Resume + WaitForCompletion of distinct seeded-random parked executions, cold " +
	"(snapshot load, one step replayed). ratio = resumeP50Ratio (large/small), target <= 2"

// scaleID names the i-th execution of a population: zero-padded, so the
// ids sort as the numbers do and a listing's position is known.
func scaleID(i int) string { return fmt.Sprintf("f-%08d", i) }

// scaleFlow runs trivialStep on its input, parks on scaleGate and returns
// the step's output plus the answer: input+2 for an answer of 1.
func scaleFlow() *loom.Flow {
	return loom.NewFlow(scaleFlowID, func(ctx *loom.Context, n int) (int, error) {
		n, err := loom.Run(ctx, trivialStep, n)
		if err != nil {
			return 0, err
		}
		answer, err := loom.Suspend[int](ctx, scaleGate)
		if err != nil {
			return 0, err
		}
		return n + answer, nil
	})
}

// scaleRuntime builds a runtime over st as workload f runs it: the
// preset's stores, the parked flow, automatic recovery off (Recover is
// called and timed instead), warnings counted.
func scaleRuntime(st scaleStores, warnings *warningLog) (*loom.Runtime, error) {
	return loom.New(loom.Config{Storage: st.preset, Flows: []*loom.Flow{scaleFlow()}, StickyParks: scaleStickyParks,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(warnings)})
}

// measureScale runs workload f over st: both builds first, so both
// measurements run in a process that has built the same.
func measureScale(ctx context.Context, st scaleStorage, small, large int, progress func(string, ...any)) (*ScaleReport, error) {
	resumes := min(maxScaleResumes, small/2)
	warmups := min(scaleResumeWarmups, small/2)
	r := &ScaleReport{Description: scaleDescription, BuildWorkers: scaleBuildWorkers, StickyParks: scaleStickyCap,
		Resumes: resumes, ResumeWarmups: warmups, Seed: scaleSeed, Target: 2, Comparison: atMost}
	sizes := []*ScaleSize{&r.Small, &r.Large}
	for i, n := range []int{small, large} {
		if err := buildPopulation(ctx, st, n, sizes[i], progress); err != nil {
			return nil, fmt.Errorf("workload f: building %d parked executions: %w", n, err)
		}
	}
	for i, n := range []int{small, large} {
		if err := measurePopulation(ctx, st, n, resumes, warmups, sizes[i], progress); err != nil {
			return nil, fmt.Errorf("workload f: %d parked executions: %w", n, err)
		}
	}
	s, l := &r.Small, &r.Large
	r.ResumeP50Ratio, r.ResumeP99Ratio = ratioOf(s.ResumeP50Ms, l.ResumeP50Ms), ratioOf(s.ResumeP99Ms, l.ResumeP99Ms)
	r.RSSRatio = ratioOf(float64(s.RSSBytes), float64(l.RSSBytes))
	r.HeapInuseRatio = ratioOf(float64(s.HeapInuseBytes), float64(l.HeapInuseBytes))
	r.RecoveryRatio = ratioOf(s.RecoveryMs, l.RecoveryMs)
	r.Ratio = r.ResumeP50Ratio
	r.Met = s.ResumeP50Ms > 0 && r.Ratio <= r.Target
	progress("workload f: resume p50 %.2f ms at %d, %.2f ms at %d: ratio %.2f; RSS %.1f MiB vs %.1f MiB: ratio %.2f; "+
		"recovery %.0f ms vs %.0f ms", s.ResumeP50Ms, s.Executions, l.ResumeP50Ms, l.Executions, r.Ratio,
		mib(s.RSSBytes), mib(l.RSSBytes), r.RSSRatio, s.RecoveryMs, l.RecoveryMs)
	return r, nil
}

// buildPopulation starts n parked executions on a fresh storage, reads the
// build runtime's memory while it still holds its sticky parks, closes it
// and sizes the storage.
func buildPopulation(ctx context.Context, st scaleStorage, n int, out *ScaleSize, progress func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, scaleBuildTimeout)
	defer cancel()
	if err := buildAndClose(ctx, st, n, out, progress); err != nil {
		return err
	}
	sz, err := st.size(ctx, n)
	if err != nil {
		return err
	}
	out.StoreBytes, out.StoreBytesPerExecution = sz.total, round(float64(sz.total)/float64(n))
	if _, ok := st.(sqliteScale); ok {
		out.MainFileBytes, out.WALBytes = &sz.mainFile, &sz.wal
	}
	progress("workload f: %d parked in %.1f s (%.0f/s), storage %.1f MiB (%.0f B each), build heap %.1f MiB, %d goroutines",
		n, out.BuildSec, out.BuildPerSec, mib(sz.total), out.StoreBytesPerExecution, mib(int64(out.BuildHeapInuseBytes)),
		out.BuildGoroutines)
	return nil
}

// buildAndClose is buildPopulation up to the close of runtime and storage.
func buildAndClose(ctx context.Context, st scaleStorage, n int, out *ScaleSize, progress func(string, ...any)) (err error) {
	s, err := st.open(ctx, n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	warnings := &warningLog{}
	rt, err := scaleRuntime(s, warnings)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	start := time.Now()
	if err := startParked(ctx, rt, n, start, progress); err != nil {
		return err
	}
	elapsed := time.Since(start)
	m, err := readMemory()
	if err != nil {
		return err
	}
	out.Executions, out.BuildSec, out.BuildPerSec = n, round(elapsed.Seconds()), round(perSecond(int64(n), elapsed))
	out.BuildHeapInuseBytes, out.BuildGoroutines = m.heapInuse, m.goroutines
	return warningsErr(warnings)
}

// startParked starts executions 0…n-1 from scaleBuildWorkers goroutines,
// each waiting for its park before the next, and reports progress.
func startParked(ctx context.Context, rt *loom.Runtime, n int, start time.Time, progress func(string, ...any)) error {
	return startAll(ctx, rt, n, start, "workload f", "parked", startOne, progress)
}

// startAll runs one(ctx, rt, i) for i in 0…n-1 from scaleBuildWorkers
// goroutines, and reports progress as what of how many are done.
func startAll(ctx context.Context, rt *loom.Runtime, n int, start time.Time, what, done string,
	one func(context.Context, *loom.Runtime, int) error, progress func(string, ...any)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, parked atomic.Int64
		errs         = make([]error, scaleBuildWorkers)
		wg           sync.WaitGroup
	)
	for w := range scaleBuildWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if errs[w] = one(ctx, rt, i); errs[w] != nil {
					cancel()
					return
				}
				parked.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	tick := time.NewTicker(scaleProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-finished:
			return errors.Join(errs...)
		case <-tick.C:
			k := parked.Load()
			progress("%s: building %d: %d %s (%.0f/s)", what, n, k, done, perSecond(k, time.Since(start)))
		}
	}
}

// startOne starts execution i and waits until its park is durable.
func startOne(ctx context.Context, rt *loom.Runtime, i int) error {
	id, err := rt.Start(ctx, scaleFlowID, i, loom.WithExecutionID(scaleID(i)))
	if err != nil {
		return err
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		return fmt.Errorf("execution %s: %w", id, err)
	}
	return nil
}

// measurePopulation opens a fresh runtime over the population of n,
// recovers, reads the memory, lists and resumes.
func measurePopulation(ctx context.Context, st scaleStorage, n, resumes, warmups int, out *ScaleSize,
	progress func(string, ...any)) (err error) {
	before, err := readMemory()
	if err != nil {
		return err
	}
	t0 := time.Now()
	s, err := st.open(ctx, n)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	warnings := &warningLog{}
	rt, err := scaleRuntime(s, warnings)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	out.OpenMs = millis(time.Since(t0))
	progress("workload f: %d: recovery pass (it loads every parked execution)", n)
	if err := timeRecovery(ctx, rt, s, out); err != nil {
		return err
	}
	after, err := readMemory()
	if err != nil {
		return err
	}
	out.RSSBeforeOpenBytes, out.RSSBytes, out.RuntimeRSSBytes = before.rss, after.rss, after.rss-before.rss
	out.HeapInuseBeforeOpenBytes, out.HeapInuseBytes, out.Goroutines = before.heapInuse, after.heapInuse, after.goroutines
	idx, ok := s.events.(store.StatusIndex)
	if !ok {
		return errors.New("the event store keeps no status index (store.StatusIndex)")
	}
	if err := walkIndex(ctx, idx, n, out); err != nil {
		return err
	}
	if err := measureListings(ctx, idx, s.events, n, out); err != nil {
		return err
	}
	lat, err := resumeRandom(ctx, rt, n, resumes, warmups)
	if err != nil {
		return err
	}
	out.ResumeP50Ms, out.ResumeP99Ms = millis(percentile(lat, 50)), millis(percentile(lat, 99))
	out.ResumeMaxMs = millis(lat[len(lat)-1]) // percentile sorted them
	progress("workload f: %d: recovery %.0f ms, index walk %.0f ms, RSS %.1f MiB (%+.1f MiB), heap %.1f MiB, "+
		"list 10 pages %.2f ms, deep page %.2f ms, resume p50 %.2f ms p99 %.2f ms", n, out.RecoveryMs, out.IndexPassMs,
		mib(out.RSSBytes), mib(out.RuntimeRSSBytes), mib(int64(out.HeapInuseBytes)), out.ListUnfinished.FirstPagesMs,
		out.ListUnfinished.DeepPageMs, out.ResumeP50Ms, out.ResumeP99Ms)
	return warningsErr(warnings)
}

// timeRecovery times Runtime.Recover and checks it re-drove nothing and
// committed no append.
func timeRecovery(ctx context.Context, rt *loom.Runtime, s scaleStores, out *ScaleSize) error {
	ctx, cancel := context.WithTimeout(ctx, scaleRecoveryTimeout)
	defer cancel()
	tx := s.transactions()
	start := time.Now()
	n, err := rt.Recover(ctx)
	out.RecoveryMs = millis(time.Since(start))
	out.Recovered, out.RecoveryTransactions = n, s.transactions()-tx
	switch {
	case err != nil:
		return fmt.Errorf("recovery: %w", err)
	case n != 0 || out.RecoveryTransactions != 0:
		return fmt.Errorf("recovery re-drove %d and committed %d append transactions over parked executions, want none",
			n, out.RecoveryTransactions)
	}
	return nil
}

// walkIndex pages through the whole status index as a periodic recovery
// pass does, and checks it lists exactly the n parked executions.
func walkIndex(ctx context.Context, idx store.StatusIndex, n int, out *ScaleSize) error {
	start := time.Now()
	entries, after := 0, ""
	for {
		page, err := idx.ListUnfinished(ctx, after, scaleIndexPage)
		if err != nil {
			return err
		}
		for _, e := range page.Executions {
			if e.Status != store.UnfinishedSuspended {
				return fmt.Errorf("the status index lists %s as %s, want suspended", e.ExecutionID, e.Status)
			}
		}
		entries += len(page.Executions)
		if after = page.Next; after == "" {
			break
		}
	}
	out.IndexPassMs, out.IndexEntries = millis(time.Since(start)), entries
	if entries != n {
		return fmt.Errorf("the status index lists %d unfinished executions, want %d", entries, n)
	}
	return nil
}

// listPage reads one page of a listing: its ids, in order, and the cursor
// of the next page.
type listPage func(ctx context.Context, after string, limit int) ([]string, string, error)

// measureListings pages through ListUnfinished (every entry must be
// suspended) and ListExecutions (every execution must hold the first's
// event count).
func measureListings(ctx context.Context, idx store.StatusIndex, events store.EventStore, n int, out *ScaleSize) error {
	unfinished := func(ctx context.Context, after string, limit int) ([]string, string, error) {
		page, err := idx.ListUnfinished(ctx, after, limit)
		ids := make([]string, len(page.Executions))
		for i, e := range page.Executions {
			if e.Status != store.UnfinishedSuspended {
				return nil, "", fmt.Errorf("ListUnfinished: %s is %s, want suspended", e.ExecutionID, e.Status)
			}
			ids[i] = e.ExecutionID
		}
		return ids, page.Next, err
	}
	executions := func(ctx context.Context, after string, limit int) ([]string, string, error) {
		page, err := events.ListExecutions(ctx, after, limit)
		ids := make([]string, len(page.Executions))
		for i, e := range page.Executions {
			if out.EventsPerExecution == 0 {
				out.EventsPerExecution = e.Length
			}
			if e.Length != out.EventsPerExecution {
				return nil, "", fmt.Errorf("ListExecutions: %s holds %d events, the first %d", e.ExecutionID, e.Length,
					out.EventsPerExecution)
			}
			ids[i] = e.ExecutionID
		}
		return ids, page.Next, err
	}
	var err error
	if out.ListUnfinished, err = pageThrough(ctx, n, unfinished); err != nil {
		return err
	}
	out.ListExecutions, err = pageThrough(ctx, n, executions)
	return err
}

// pageThrough times the first scaleFirstPages pages of list, then the page
// after the id 90 % into the population, and checks each holds the ids it
// must: the population is scaleID(0…n-1) and nothing else.
func pageThrough(ctx context.Context, n int, list listPage) (ScaleListing, error) {
	l := ScaleListing{PageSize: scalePageSize}
	var pages []time.Duration
	start, after := time.Now(), ""
	for len(pages) < scaleFirstPages {
		t := time.Now()
		ids, next, err := list(ctx, after, scalePageSize)
		if err != nil {
			return l, err
		}
		pages = append(pages, time.Since(t))
		if err := checkIDs(ids, l.Listed, n); err != nil {
			return l, err
		}
		l.Listed += len(ids)
		if after = next; after == "" {
			break
		}
	}
	l.FirstPagesMs, l.Pages, l.PageMs = millis(time.Since(start)), len(pages), millis(median(pages))
	deep := n * 9 / 10
	l.DeepAfter = scaleID(deep)
	var reads []time.Duration
	for range scaleDeepReads {
		t := time.Now()
		ids, _, err := list(ctx, l.DeepAfter, scalePageSize)
		if err != nil {
			return l, err
		}
		reads = append(reads, time.Since(t))
		if err := checkIDs(ids, deep+1, n); err != nil {
			return l, err
		}
		if want := min(scalePageSize, n-deep-1); len(ids) != want {
			return l, fmt.Errorf("the page after %s holds %d ids, want %d", l.DeepAfter, len(ids), want)
		}
	}
	l.DeepPageMs = millis(median(reads))
	return l, nil
}

// checkIDs checks ids are scaleID(from), scaleID(from+1)… below n.
func checkIDs(ids []string, from, n int) error {
	for i, id := range ids {
		if from+i >= n || id != scaleID(from+i) {
			return fmt.Errorf("listing: id %q at position %d, want %s", id, from+i, scaleID(from+i))
		}
	}
	return nil
}

// resumeRandom resumes warmups and then resumes distinct parked executions,
// picked at random (scaleSeed), one at a time, each until it completed,
// and returns the measured latencies.
func resumeRandom(ctx context.Context, rt *loom.Runtime, n, resumes, warmups int) ([]time.Duration, error) {
	rng := rand.New(rand.NewPCG(scaleSeed, uint64(n)))
	picked := map[int]bool{}
	var lat []time.Duration
	for len(picked) < warmups+resumes {
		i := rng.IntN(n)
		if picked[i] {
			continue
		}
		picked[i] = true
		d, err := resumeParkedOne(ctx, rt, i)
		if err != nil {
			return nil, fmt.Errorf("resume of %s: %w", scaleID(i), err)
		}
		if len(picked) > warmups {
			lat = append(lat, d)
		}
	}
	return lat, nil
}

// resumeParkedOne answers execution i's gate with 1 and waits for its
// completion with output i+2.
func resumeParkedOne(ctx context.Context, rt *loom.Runtime, i int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, scaleResumeTimeout)
	defer cancel()
	id := scaleID(i)
	start := time.Now()
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: scaleGate, Payload: json.RawMessage("1")}); err != nil {
		return 0, err
	}
	res, err := rt.WaitForCompletion(ctx, id)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if res.Status != fold.StatusCompleted || string(res.Output) != strconv.Itoa(i+2) {
		return 0, fmt.Errorf("ended %s with output %s, want completed with %d", res.Status, res.Output, i+2)
	}
	return d, nil
}

// warningsErr fails if the runtime logged a warning: a snapshot ignored, a
// replay diverged, a drive aborted would change what the figures mean.
func warningsErr(w *warningLog) error {
	if n, first := w.read(); n > 0 {
		return fmt.Errorf("the runtime logged %d warning(s), the first: %s", n, first)
	}
	return nil
}

// mib renders bytes in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// ScaleReport is workload f: two populations of parked executions, each
// measured by a fresh runtime over the reopened storage (Small, Large),
// and the large/small ratios. Ratio, Target, Comparison and Met judge the
// median resume latency's ratio; the memory ratios are reported beside it:
// near 1 when a runtime holds no memory per parked execution.
type ScaleReport struct {
	Description  string `json:"description"`
	BuildWorkers int    `json:"buildWorkers"`
	// StickyParks is the sticky-park cap every runtime ran under (the
	// default): a build runtime holds at most that many parked flows.
	StickyParks int `json:"stickyParks"`
	// Resumes are measured per size after ResumeWarmups unmeasured ones,
	// each of a distinct execution picked from Seed and the size.
	Resumes       int       `json:"resumes"`
	ResumeWarmups int       `json:"resumeWarmups"`
	Seed          uint64    `json:"seed"`
	Small         ScaleSize `json:"small"`
	Large         ScaleSize `json:"large"`
	// Large over small: the resume percentiles, the process RSS and the
	// heap in use after the recovery pass, and the recovery pass. (The
	// sizes' RuntimeRSSBytes are too small for a ratio to mean anything:
	// the page faults of a few reads move them.)
	ResumeP50Ratio float64 `json:"resumeP50Ratio"`
	ResumeP99Ratio float64 `json:"resumeP99Ratio"`
	RSSRatio       float64 `json:"rssRatio"`
	HeapInuseRatio float64 `json:"heapInuseRatio"`
	RecoveryRatio  float64 `json:"recoveryRatio"`
	// Ratio is ResumeP50Ratio, judged against Target.
	Ratio      float64 `json:"ratio"`
	Target     float64 `json:"target"`
	Comparison string  `json:"comparison"`
	Met        bool    `json:"met"`
}

// ScaleSize is one population: its build, its storage, and what a fresh
// runtime over it measured.
type ScaleSize struct {
	Executions int `json:"executions"`
	// EventsPerExecution is each parked log's length (ListExecutions).
	EventsPerExecution int64 `json:"eventsPerExecution"`
	// BuildSec is the first Start → the last park durable; BuildPerSec
	// parked executions per second. BuildHeapInuseBytes and
	// BuildGoroutines are read right after, the build runtime still open
	// and holding its sticky parks.
	BuildSec            float64 `json:"buildSec"`
	BuildPerSec         float64 `json:"buildPerSec"`
	BuildHeapInuseBytes uint64  `json:"buildHeapInuseBytes"`
	BuildGoroutines     int     `json:"buildGoroutines"`
	// StoreBytes is the storage after the build (SQLite: MainFileBytes +
	// WALBytes after a TRUNCATE checkpoint; PostgreSQL: the schema's
	// tables, indexes and TOAST).
	StoreBytes             int64   `json:"storeBytes"`
	StoreBytesPerExecution float64 `json:"storeBytesPerExecution"`
	MainFileBytes          *int64  `json:"mainFileBytes,omitempty"`
	WALBytes               *int64  `json:"walBytes,omitempty"`
	// OpenMs is opening the storage and building the fresh runtime.
	OpenMs float64 `json:"openMs"`
	// RecoveryMs is Runtime.Recover over the population: it re-drove
	// Recovered executions and committed RecoveryTransactions append
	// transactions (both must be 0, or the run fails).
	RecoveryMs           float64 `json:"recoveryMs"`
	Recovered            int     `json:"recovered"`
	RecoveryTransactions int64   `json:"recoveryTransactions"`
	// IndexPassMs is paging the whole status index by 256, as a periodic
	// recovery pass reads it; IndexEntries the entries, all suspended.
	IndexPassMs  float64 `json:"indexPassMs"`
	IndexEntries int     `json:"indexEntries"`
	// Memory after a GC that returned what it could to the OS: before the
	// storage was opened, and after the recovery pass; RuntimeRSSBytes is
	// RSSBytes − RSSBeforeOpenBytes. RSS is VmRSS (0 without /proc).
	RSSBeforeOpenBytes       int64  `json:"rssBeforeOpenBytes"`
	RSSBytes                 int64  `json:"rssBytes"`
	RuntimeRSSBytes          int64  `json:"runtimeRssBytes"`
	HeapInuseBeforeOpenBytes uint64 `json:"heapInuseBeforeOpenBytes"`
	HeapInuseBytes           uint64 `json:"heapInuseBytes"`
	Goroutines               int    `json:"goroutines"`
	// The listings: the status index (by status: every entry is
	// suspended) and every execution.
	ListUnfinished ScaleListing `json:"listUnfinished"`
	ListExecutions ScaleListing `json:"listExecutions"`
	// Resume + WaitForCompletion, cold: percentiles of the measured resumes.
	ResumeP50Ms float64 `json:"resumeP50Ms"`
	ResumeP99Ms float64 `json:"resumeP99Ms"`
	ResumeMaxMs float64 `json:"resumeMaxMs"`
}

// ScaleListing is paging through one listing: Pages pages of PageSize from
// the start (FirstPagesMs in all, PageMs their median) holding Listed ids,
// then the page after DeepAfter, 90 % into the ids (DeepPageMs, the median
// of several reads).
type ScaleListing struct {
	PageSize     int     `json:"pageSize"`
	Pages        int     `json:"pages"`
	Listed       int     `json:"listed"`
	FirstPagesMs float64 `json:"firstPagesMs"`
	PageMs       float64 `json:"pageMs"`
	DeepAfter    string  `json:"deepAfter"`
	DeepPageMs   float64 `json:"deepPageMs"`
}
