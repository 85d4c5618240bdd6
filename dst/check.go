package dst

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The flags of a test binary that runs Check. Like every test flag they go
// after the packages: go test ./dst -dst.seeds=100000 -timeout 0.
var (
	seedsFlag = flag.Int("dst.seeds", 0, "dst: how many seeds Check runs (0: the test's own count)")
	seedFlag  = flag.String("dst.seed", "", "dst: run only this seed, print its schedule and trace")
	firstFlag = flag.Uint64("dst.first", 0, "dst: the first seed Check runs (0: the test's own, 1 by default)")
)

// DefaultSeeds is how many seeds Check runs when neither its options nor
// -dst.seeds say.
const DefaultSeeds = 1000

// CheckOptions configure Check. The zero value runs DefaultSeeds seeds
// from seed 1 on every CPU and shrinks a failure within
// DefaultShrinkBudget replays.
type CheckOptions struct {
	Seeds        int
	First        uint64
	Workers      int
	ShrinkBudget int
	// MaxReported bounds the failing seeds reported one by one (default 3;
	// the count of the rest is reported).
	MaxReported int
	// Known are the tracked failures that do not fail the test.
	Known []KnownIssue
}

// KnownIssue is a failure Check logs instead of failing the test: a bug
// DST found that is tracked and not fixed yet. A violation is known when
// its invariant is Invariant and its detail contains Contains; a seed
// whose every violation is known counts under the issue, and one with
// any other violation fails as usual. Pin each issue's shrunk schedule in
// a test of its own, so its fix is noticed.
type KnownIssue struct {
	Invariant string
	Contains  string
	// Note says where it is tracked and what it is.
	Note string
}

func (k KnownIssue) matches(v Violation) bool {
	return v.Invariant == k.Invariant && strings.Contains(v.Detail, k.Contains)
}

func isKnown(v Violation, known []KnownIssue) bool {
	for _, k := range known {
		if k.matches(v) {
			return true
		}
	}
	return false
}

// unknown returns the violations known does not list.
func unknown(vs []Violation, known []KnownIssue) []Violation {
	var out []Violation
	for _, v := range vs {
		if !isKnown(v, known) {
			out = append(out, v)
		}
	}
	return out
}

// Summary is what Check ran.
type Summary struct {
	Runs    int
	Failed  []uint64
	Elapsed time.Duration
	// Known counts, by KnownIssue.Note, the seeds that broke only known
	// issues.
	Known map[string][]uint64
	// Shrunk is the shrink of the first failing seed, when one failed.
	Shrunk *Shrunk
}

// SeedsPerMinute is the run rate.
func (s Summary) SeedsPerMinute() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Runs) / s.Elapsed.Minutes()
}

// Check runs sim over seeds and fails t for each seed that breaks an
// invariant. It runs the seeds First, First+1, … (opts, or the flags
// -dst.seeds and -dst.first); with -dst.seed=N it runs that seed alone and
// logs its schedule and trace. A failure is reported with its violations
// and a one-line reproduction, and the first failing seed is shrunk: the
// minimal schedule is printed in the text form a test pins with
// MustParseSchedule and Simulation.Replay.
func Check(t testing.TB, sim *Simulation, opts CheckOptions) Summary {
	t.Helper()
	if *seedFlag != "" {
		seed, err := strconv.ParseUint(*seedFlag, 10, 64)
		if err != nil {
			t.Fatalf("dst: -dst.seed=%q is not a seed: %v", *seedFlag, err)
		}
		start := time.Now()
		res := sim.Run(seed)
		t.Logf("dst: seed %d\n%s\ntrace:\n  %s", seed, res.Schedule, strings.Join(res.Trace, "\n  "))
		sum := Summary{Runs: 1, Elapsed: time.Since(start), Known: map[string][]uint64{}}
		sum.record(t, sim, res, opts)
		if res.Failed() && len(sum.Failed) == 0 {
			t.Logf("dst: seed %d breaks only known issues:\n%v", seed, res.Err())
		}
		return sum
	}
	n := opts.Seeds
	if *seedsFlag > 0 {
		n = *seedsFlag
	}
	if n <= 0 {
		n = DefaultSeeds
	}
	first := opts.First
	if *firstFlag > 0 {
		first = *firstFlag
	}
	if first == 0 {
		first = 1
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	failed := make([]*Result, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if res := sim.Run(first + uint64(i)); res.Failed() {
					failed[i] = res
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	sum := Summary{Runs: n, Elapsed: time.Since(start), Known: map[string][]uint64{}}
	for _, res := range failed {
		if res != nil {
			sum.record(t, sim, res, opts)
		}
	}
	maxReported := cmpOr(opts.MaxReported, 3)
	if len(sum.Failed) > maxReported {
		t.Errorf("dst: %d of %d seeds failed (%d reported above): %v", len(sum.Failed), n, maxReported, sum.Failed)
	}
	for _, k := range opts.Known {
		if seeds := sum.Known[k.Note]; len(seeds) > 0 {
			t.Logf("dst: known issue in %d of %d seeds (first: %d, %s): %s", len(seeds), n, seeds[0], Reproduction(t, seeds[0]), k.Note)
		}
	}
	return sum
}

// record counts one failing run: under a known issue, or as a failure of
// t (the first one shrunk, the next few reported, the rest counted).
func (sum *Summary) record(t testing.TB, sim *Simulation, res *Result, opts CheckOptions) {
	t.Helper()
	if !res.Failed() {
		return
	}
	seed := res.Schedule.Seed
	news := unknown(res.Violations, opts.Known)
	if len(news) == 0 {
		for _, k := range opts.Known {
			if slices.ContainsFunc(res.Violations, k.matches) {
				sum.Known[k.Note] = append(sum.Known[k.Note], seed)
				break
			}
		}
		return
	}
	sum.Failed = append(sum.Failed, seed)
	switch {
	case len(sum.Failed) == 1:
		sum.Shrunk = report(t, sim, res, news[0].Invariant, opts)
	case len(sum.Failed) <= cmpOr(opts.MaxReported, 3):
		t.Errorf("%v\n  reproduce: %s", res.Err(), Reproduction(t, seed))
	}
}

// report fails t with res and its shrink against invariant.
func report(t testing.TB, sim *Simulation, res *Result, invariant string, opts CheckOptions) *Shrunk {
	t.Helper()
	sh := sim.shrink(res, invariant, opts.Known, opts.ShrinkBudget)
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n  reproduce: %s\n", res.Err(), Reproduction(t, res.Schedule.Seed))
	if !sh.Reproduced {
		fmt.Fprintf(&b, "  the recorded schedule (%d entries) did not break %s again on replay: an interleaving the Go scheduler chose (see the package docs)\n%s",
			res.Schedule.Len(), sh.Invariant, indent(res.Schedule.String()))
	} else {
		fmt.Fprintf(&b, "  shrunk from %d to %d entries in %d replays, still breaking %s:\n%s  pin it: sim.Replay(dst.MustParseSchedule(`...`))\n  its trace:\n%s",
			res.Schedule.Len(), sh.Result.Schedule.Len(), sh.Replays, sh.Invariant, indent(sh.Result.Schedule.String()),
			indent(strings.Join(sh.Result.Trace, "\n")+"\n"))
	}
	t.Error(b.String())
	return &sh
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString("    ")
			b.WriteString(line)
		}
	}
	return b.String()
}

// Reproduction is the one-line command that runs seed alone in t's test:
// go test ./<package> -run '^<test>$' -dst.seed=<seed>.
func Reproduction(t testing.TB, seed uint64) string {
	name := t.Name()
	if i := strings.IndexByte(name, '/'); i >= 0 {
		name = name[:i]
	}
	return fmt.Sprintf("go test %s -run '^%s$' -dst.seed=%d", packageDir(), name, seed)
}

// packageDir is the test's package directory relative to its module root
// (a test runs in its package directory), "." when it cannot tell.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}
