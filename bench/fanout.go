package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
)

// Workload g: a fan-out of N child flows against N independent starts of
// the same flow, on the same store in the same run. Each size (-fanout-small,
// -fanout-large) gets a fresh store and one runtime (Features.Children,
// WriteBehind, the default config otherwise), and each repetition measures
// both phases back to back, starts first in even repetitions and fan-out
// first in odd ones (the store grows through a run, so a fixed order would
// always give one phase the larger tables):
//
//	starts   N sequential rt.Start of the child flow (each returns once its
//	         start is durable), then WaitForCompletion of every one: the
//	         first Start → the last completion
//	fan-out  one parent that spawns N children (SpawnChild, each a recorded
//	         step that starts its child) and awaits them with AwaitChildren,
//	         then returns the sum of their outputs: Start → the parent's
//	         completion
//
// The child flow runs one trivial step. ratio = the median of the
// repetitions' fan-out / starts per size; the worse size's is judged
// against 1.5; the large/small per-child times
// are reported beside it (near 1: linear). Appends and events per child are
// counted by the decorator around the event store, the parent's included
// in the fan-out's.

// Limits of workload g.
const (
	// maxFanOutChildren caps a fan-out (and so the parent's log).
	maxFanOutChildren = 10_000
	// maxFanOutRepetitions caps the measured repetitions per size.
	maxFanOutRepetitions = 100
	// fanOutWarmup is the children of the unmeasured round each size runs
	// first (both phases).
	fanOutWarmup = 10
	// fanOutTimeout bounds one phase of one repetition.
	fanOutTimeout = 10 * time.Minute
)

const (
	fanChildFlowID  = "fan-child"
	fanParentFlowID = "fan-parent"
	// fanOutDurability is every runtime's of workload g, the default;
	// fanOutDurabilityName names it in the report.
	fanOutDurability     = loom.WriteBehind
	fanOutDurabilityName = "WriteBehind"
)

// fanOutDescription is workload g's description in the report.
const fanOutDescription = "Fan-out of N children vs N independent starts of the same flow (one trivial step), " +
	"on the same fresh store per size and the same runtime (Features.Children, WriteBehind, default config), " +
	"medians of the repetitions, each measuring starts then fan-out. starts: N sequential rt.Start (each returns " +
	"once the start is durable), then WaitForCompletion of all, first Start → last completion. fan-out: one parent " +
	"spawning N children with SpawnChild and awaiting them with AwaitChildren, Start → the parent's completion. " +
	"the two phases of a repetition run back to back and take turns at going first; ratio = the median of the " +
	"repetitions' fan-out/starts at the worse size, target <= 1.5; linearity = large/small per child"

// fanChildFlow runs trivialStep on its input: n+1.
func fanChildFlow() *loom.Flow {
	return loom.NewFlow(fanChildFlowID, func(ctx *loom.Context, n int) (int, error) {
		return loom.Run(ctx, trivialStep, n)
	})
}

// fanParentFlow spawns n children (child i gets input i) and awaits them
// all; it returns the sum of their outputs, n(n+1)/2, and fails if a child
// did not complete.
func fanParentFlow() *loom.Flow {
	return loom.NewFlow(fanParentFlowID, func(ctx *loom.Context, n int) (int, error) {
		kids := make([]loom.Child, 0, n)
		for i := range n {
			k, err := loom.SpawnChild(ctx, fanChildFlowID, fanChildName(i), i)
			if err != nil {
				return 0, err
			}
			kids = append(kids, k)
		}
		results, err := loom.AwaitChildren(ctx, kids)
		if err != nil {
			return 0, err
		}
		sum := 0
		for _, r := range results {
			if r.Status != fold.StatusCompleted {
				return 0, fmt.Errorf("child %s ended %s", r.ChildID, r.Status)
			}
			v, err := strconv.Atoi(string(r.Output))
			if err != nil {
				return 0, fmt.Errorf("child %s: output %s: %w", r.ChildID, r.Output, err)
			}
			sum += v
		}
		return sum, nil
	})
}

// fanChildName names child i: zero-padded, so the names sort as spawned.
func fanChildName(i int) string { return fmt.Sprintf("c%05d", i) }

// fanOutSum is what a fan-out of n returns: the children's outputs 1…n.
func fanOutSum(n int) int { return n * (n + 1) / 2 }

// measureFanOut runs workload g at both sizes.
func measureFanOut(ctx context.Context, open storeOpener, small, large, reps int, progress func(string, ...any)) (*FanOutReport, error) {
	r := &FanOutReport{Description: fanOutDescription, Durability: fanOutDurabilityName, Repetitions: reps, Warmup: fanOutWarmup,
		Target: 1.5, Comparison: atMost}
	for i, n := range []int{small, large} {
		size := &r.Small
		if i == 1 {
			size = &r.Large
		}
		if err := fanOutSize(ctx, open, n, reps, size, progress); err != nil {
			return nil, fmt.Errorf("workload g: %d children: %w", n, err)
		}
	}
	s, l := &r.Small, &r.Large
	r.Linearity = FanOutLinearity{
		StartsMsPerChild: ratioOf(s.StartsMsPerChild, l.StartsMsPerChild),
		FanOutMsPerChild: ratioOf(s.FanOutMsPerChild, l.FanOutMsPerChild),
	}
	r.Ratio = max(s.Ratio, l.Ratio)
	r.Met = s.StartsMs > 0 && l.StartsMs > 0 && r.Ratio <= r.Target
	progress("workload g: %d children: starts %.1f ms, fan-out %.1f ms, ratio %.2f; %d: starts %.1f ms, fan-out %.1f ms, "+
		"ratio %.2f; linearity (fan-out per child) %.2f", s.Children, s.StartsMs, s.FanOutMs, s.Ratio, l.Children,
		l.StartsMs, l.FanOutMs, l.Ratio, r.Linearity.FanOutMsPerChild)
	return r, nil
}

// fanOutSize measures one size on a fresh store: a warm-up round, then
// reps repetitions of both phases.
func fanOutSize(ctx context.Context, open storeOpener, n, reps int, out *FanOutSize, progress func(string, ...any)) (err error) {
	st, err := open(ctx, "g"+strconv.Itoa(n))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	events := &countingStore{EventStore: st.events}
	warnings := &warningLog{}
	rt, err := loom.New(loom.Config{Events: events, Snapshots: st.snapshots, Flows: []*loom.Flow{fanChildFlow(), fanParentFlow()},
		Features: loom.Features{Children: true}, Durability: fanOutDurability, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(warnings)})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rt.Close()) }()
	if _, err := runStarts(ctx, rt, "w", fanOutWarmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := runFanOut(ctx, rt, "w", fanOutWarmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var starts, fans []time.Duration
	var startsCount, fanCount counts
	var startsTx, fanTx int64
	var ratios []float64
	for rep := range reps {
		prefix := "r" + strconv.Itoa(rep)
		phaseStarts := func() (time.Duration, error) {
			before, txBefore := events.read(), st.transactions()
			d, err := runStarts(ctx, rt, prefix, n)
			after, txAfter := events.read(), st.transactions()
			startsCount, startsTx = startsCount.plus(after.minus(before)), startsTx+txAfter-txBefore
			return d, err
		}
		phaseFanOut := func() (time.Duration, error) {
			before, txBefore := events.read(), st.transactions()
			d, err := runFanOut(ctx, rt, prefix, n)
			after, txAfter := events.read(), st.transactions()
			fanCount, fanTx = fanCount.plus(after.minus(before)), fanTx+txAfter-txBefore
			return d, err
		}
		// The phases take turns going first: the store grows through a run,
		// so a fixed order would always measure one of them on the larger
		// tables.
		first, second := phaseStarts, phaseFanOut
		if rep%2 == 1 {
			first, second = phaseFanOut, phaseStarts
		}
		a, err := first()
		if err != nil {
			return err
		}
		b, err := second()
		if err != nil {
			return err
		}
		s, f := a, b
		if rep%2 == 1 {
			s, f = b, a
		}
		starts, fans, ratios = append(starts, s), append(fans, f), append(ratios, ratioOf(millis(s), millis(f)))
		progress("workload g: %d children, repetition %d: starts %.1f ms, fan-out %.1f ms", n, rep+1, millis(s), millis(f))
	}
	perChild := func(c counts) (float64, float64) {
		k := float64(n * reps)
		return round(float64(c.appends) / k), round(float64(c.events) / k)
	}
	out.Children = n
	out.StartsMs, out.FanOutMs = millis(median(slices.Clone(starts))), millis(median(slices.Clone(fans)))
	out.StartsSamplesMs, out.FanOutSamplesMs = samplesMs(starts), samplesMs(fans)
	out.StartsMsPerChild, out.FanOutMsPerChild = round(out.StartsMs/float64(n)), round(out.FanOutMs/float64(n))
	out.StartsAppendsPerChild, out.StartsEventsPerChild = perChild(startsCount)
	out.FanOutAppendsPerChild, out.FanOutEventsPerChild = perChild(fanCount)
	out.StartsTransactionsPerChild = round(float64(startsTx) / float64(n*reps))
	out.FanOutTransactionsPerChild = round(float64(fanTx) / float64(n*reps))
	// The median of the repetitions' own ratios: each pairs two phases run
	// back to back, so drift across the run cancels out of it.
	out.Ratio = round(medianOf(ratios))
	out.RatioSamples = ratios
	return warningsErr(warnings)
}

// runStarts starts n child flows one after the other under ids
// <prefix>-s<i>, then waits for each to complete with output i+1.
func runStarts(ctx context.Context, rt *loom.Runtime, prefix string, n int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, fanOutTimeout)
	defer cancel()
	ids := make([]string, n)
	start := time.Now()
	for i := range n {
		id, err := rt.Start(ctx, fanChildFlowID, i, loom.WithExecutionID(prefix+"-s"+strconv.Itoa(i)))
		if err != nil {
			return 0, err
		}
		ids[i] = id
	}
	for i, id := range ids {
		res, err := rt.WaitForCompletion(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("execution %s: %w", id, err)
		}
		if res.Status != fold.StatusCompleted || string(res.Output) != strconv.Itoa(i+1) {
			return 0, fmt.Errorf("execution %s ended %s with output %s, want completed with %d", id, res.Status, res.Output, i+1)
		}
	}
	return time.Since(start), nil
}

// runFanOut starts a parent of n children under id <prefix>-f and waits
// for it to complete with their sum.
func runFanOut(ctx context.Context, rt *loom.Runtime, prefix string, n int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, fanOutTimeout)
	defer cancel()
	start := time.Now()
	id, err := rt.Start(ctx, fanParentFlowID, n, loom.WithExecutionID(prefix+"-f"))
	if err != nil {
		return 0, err
	}
	res, err := rt.WaitForCompletion(ctx, id)
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("parent %s: %w", id, err)
	}
	if res.Status != fold.StatusCompleted || string(res.Output) != strconv.Itoa(fanOutSum(n)) {
		return 0, fmt.Errorf("parent %s ended %s with output %s, want completed with %d", id, res.Status, res.Output, fanOutSum(n))
	}
	return d, nil
}

// plus is c and o counted together.
func (c counts) plus(o counts) counts {
	return counts{appends: c.appends + o.appends, events: c.events + o.events}
}

// FanOutReport is workload g: at each size, N independent starts of the
// child flow against one parent fanning out to N children, on the same
// store, in the same runtime. Ratio, Target, Comparison and Met judge the
// worse size's fan-out/starts.
type FanOutReport struct {
	Description string `json:"description"`
	// Durability is every runtime's loom.Durability.
	Durability  string `json:"durability"`
	Repetitions int    `json:"repetitions"`
	// Warmup is the children of each phase's unmeasured first round.
	Warmup int        `json:"warmup"`
	Small  FanOutSize `json:"small"`
	Large  FanOutSize `json:"large"`
	// Linearity is the large size's per-child times over the small one's.
	Linearity  FanOutLinearity `json:"linearity"`
	Ratio      float64         `json:"ratio"`
	Target     float64         `json:"target"`
	Comparison string          `json:"comparison"`
	Met        bool            `json:"met"`
}

// FanOutSize is one size: the medians of both phases, their samples in the
// order measured, and what each wrote per child.
type FanOutSize struct {
	Children int `json:"children"`
	// StartsMs is N starts → all completed; FanOutMs the parent's Start →
	// its completion.
	StartsMs         float64   `json:"startsMs"`
	FanOutMs         float64   `json:"fanOutMs"`
	StartsSamplesMs  []float64 `json:"startsSamplesMs"`
	FanOutSamplesMs  []float64 `json:"fanOutSamplesMs"`
	StartsMsPerChild float64   `json:"startsMsPerChild"`
	FanOutMsPerChild float64   `json:"fanOutMsPerChild"`
	// Appends (EventStore.Append calls) and events per child, counted by
	// the decorator over the repetitions; the fan-out's include the parent's.
	StartsAppendsPerChild float64 `json:"startsAppendsPerChild"`
	StartsEventsPerChild  float64 `json:"startsEventsPerChild"`
	FanOutAppendsPerChild float64 `json:"fanOutAppendsPerChild"`
	FanOutEventsPerChild  float64 `json:"fanOutEventsPerChild"`
	// TransactionsPerChild are the store writer's committed transactions
	// (group commit folds concurrent appends into one).
	StartsTransactionsPerChild float64 `json:"startsTransactionsPerChild"`
	FanOutTransactionsPerChild float64 `json:"fanOutTransactionsPerChild"`
	// Ratio is the median of RatioSamples, each repetition's fan-out over
	// its starts: the two phases of a repetition run back to back, taking
	// turns at going first.
	Ratio        float64   `json:"ratio"`
	RatioSamples []float64 `json:"ratioSamples"`
}

// FanOutLinearity is large over small, per child.
type FanOutLinearity struct {
	StartsMsPerChild float64 `json:"startsMsPerChild"`
	FanOutMsPerChild float64 `json:"fanOutMsPerChild"`
}
