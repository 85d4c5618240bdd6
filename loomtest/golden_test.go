package loomtest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/loomtest"
)

var (
	fetch = loom.NewStep("fetch", func(ctx context.Context, n int) (int, error) { return n * 10, nil })
	// label is the step whose output the mismatch test changes.
	label = func(suffix string) *loom.Step[int, string] {
		return loom.NewStep("label", func(ctx context.Context, n int) (string, error) {
			return "total " + suffix, nil
		})
	}
)

// report fetches two numbers in parallel, draws a random number (its seed
// recorded), and labels the sum; suffix changes the label. It does not read
// loom.Now: a recorded Now is the clock's reading, which Golden compares
// like any payload, and these tests run it on different clocks.
func report(suffix string) *loom.Flow {
	lbl := label(suffix)
	return loom.NewFlow("report", func(ctx *loom.Context, _ struct{}) (string, error) {
		var a, b int
		err := ctx.Parallel(
			func(ctx *loom.Context) (err error) { a, err = loom.Run(ctx, fetch.Iter(1), 1); return err },
			func(ctx *loom.Context) (err error) { b, err = loom.Run(ctx, fetch.Iter(2), 2); return err },
		)
		if err != nil {
			return "", err
		}
		_ = loom.Random(ctx).IntN(100)
		return loom.Run(ctx, lbl, a+b)
	})
}

// runReport runs report(suffix) to completion in a new Env whose clock
// starts at start, and returns the Env and the execution id.
func runReport(t *testing.T, dir, suffix string, start time.Time, id string) (*loomtest.Env, string) {
	t.Helper()
	env := loomtest.New(t, loomtest.WithFlows(report(suffix)), loomtest.WithGoldenDir(dir),
		loomtest.WithClock(loomtest.NewClock(start)))
	id = env.Start(t, "report", nil, loom.WithExecutionID(id))
	env.WaitForCompletion(t, id)
	return env, id
}

func TestGolden_RecordThenMatchIgnoringIdsTimestampsAndSeeds(t *testing.T) {
	dir := t.TempDir()
	env, id := runReport(t, dir, "ok", loomtest.Epoch, "first")
	loomtest.CheckGolden(t, filepath.Join(dir, "report"+loomtest.GoldenSuffix), env.Log(t, id), true)
	data, err := os.ReadFile(filepath.Join(dir, "report.golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{`"id"`, `"timestamp"`, `"executionId"`, "first"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("the golden file holds %s, which differs between runs", leak)
		}
	}
	if !strings.Contains(string(data), `"<random seed>"`) {
		t.Error("the golden file does not mask the random seed")
	}

	// Another run: another execution id, another clock, another seed, and
	// the branches may interleave otherwise; the golden still matches.
	again, id2 := runReport(t, dir, "ok", loomtest.Epoch.Add(time.Hour), "second")
	r := failing(t, func(tb testing.TB) { again.Golden(tb, id2, "report") })
	if got := r.report(); got != "" {
		t.Errorf("a second run of the same code does not match its golden:\n%s", got)
	}
}

func TestGolden_MismatchNamesTheSequenceAndField(t *testing.T) {
	dir := t.TempDir()
	env, id := runReport(t, dir, "ok", loomtest.Epoch, "x")
	loomtest.CheckGolden(t, filepath.Join(dir, "report"+loomtest.GoldenSuffix), env.Log(t, id), true)

	changed, id2 := runReport(t, dir, "changed", loomtest.Epoch, "x")
	r := failing(t, func(tb testing.TB) { changed.Golden(tb, id2, "report") })
	t.Log(r.report())
	log := changed.Log(t, id2)
	seq := -1
	for _, ev := range log {
		if ev.Type == "STEP_COMPLETED" && strings.Contains(string(ev.Payload), "total changed") {
			seq = int(ev.Sequence)
		}
	}
	mustContain(t, r, "report.golden.jsonl", "first difference at sequence "+itoa(seq), "field payload.output",
		`golden "total ok", now "total changed"`, "-loomtest.update")
	if r.fatal {
		t.Error("a golden mismatch stopped the test; it should report and go on")
	}
}

func TestGolden_MissingFileSaysHowToRecordIt(t *testing.T) {
	env, id := runReport(t, t.TempDir(), "ok", loomtest.Epoch, "x")
	mustContain(t, failing(t, func(tb testing.TB) { env.Golden(tb, id, "nothing-here") }),
		"nothing-here.golden.jsonl does not exist", "-loomtest.update")
	mustContain(t, failing(t, func(tb testing.TB) { env.Golden(tb, id, "../escape") }),
		"must be a non-empty local path")
}

func TestGolden_ExtraAndMissingEvents(t *testing.T) {
	dir := t.TempDir()
	env, id := runReport(t, dir, "ok", loomtest.Epoch, "x")
	log := env.Log(t, id)
	path := filepath.Join(dir, "short"+loomtest.GoldenSuffix)
	loomtest.CheckGolden(t, path, log[:len(log)-1], true)
	mustContain(t, failing(t, func(tb testing.TB) { loomtest.CheckGolden(tb, path, log, false) }),
		"first difference at sequence "+itoa(len(log)-1), "an event was added")
	mustContain(t, failing(t, func(tb testing.TB) { loomtest.CheckGolden(tb, path, log[:len(log)-2], false) }),
		"an event is missing")
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestGolden_ParallelBranchesMayInterleave(t *testing.T) {
	dir := t.TempDir()
	env, id := runReport(t, dir, "ok", loomtest.Epoch, "x")
	log := env.Log(t, id)
	path := filepath.Join(dir, "report"+loomtest.GoldenSuffix)
	loomtest.CheckGolden(t, path, log, true)

	var branch []int // the positions of the branches' events
	for i, ev := range log {
		if strings.Contains(string(ev.Payload), `"branch"`) || strings.Contains(string(ev.Payload), `"fetch#`) {
			branch = append(branch, i)
		}
	}
	if len(branch) != 4 || branch[3]-branch[0] != 3 {
		t.Fatalf("want one run of 4 branch events, got positions %v", branch)
	}
	// The same events in another order, every position keeping its
	// sequence: the two branches trade places, each in its own order.
	of := map[string][]int{}
	for _, pos := range branch {
		var p struct {
			StepID string `json:"stepId"`
		}
		if err := json.Unmarshal(log[pos].Payload, &p); err != nil {
			t.Fatal(err)
		}
		of[p.StepID] = append(of[p.StepID], pos)
	}
	one, two := of["fetch#1"], of["fetch#2"]
	if len(one) != 2 || len(two) != 2 {
		t.Fatalf("branch events by step: %v", of)
	}
	swapped := slices.Clone(log)
	for k := range 2 {
		swapped[one[k]], swapped[two[k]] = log[two[k]], log[one[k]]
		swapped[one[k]].Sequence, swapped[two[k]].Sequence = log[one[k]].Sequence, log[two[k]].Sequence
	}
	if r := failing(t, func(tb testing.TB) { loomtest.CheckGolden(tb, path, swapped, false) }); r.report() != "" {
		t.Errorf("another interleaving of the branches is reported:\n%s", r.report())
	}
	// Another event within the run is still a difference.
	changedLog := slices.Clone(swapped)
	changedLog[branch[0]].Payload = json.RawMessage(strings.Replace(string(changedLog[branch[0]].Payload), `"fetch#`, `"fetched#`, 1))
	mustContain(t, failing(t, func(tb testing.TB) { loomtest.CheckGolden(tb, path, changedLog, false) }),
		"differ in more than their order")
}

// TestGolden_CommittedFile checks the committed golden of the welcome flow
// (ExampleEnv_Golden reads it too); -loomtest.update records it again.
func TestGolden_CommittedFile(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(welcome))
	id := env.Start(t, "welcome", "ada")
	env.WaitForGate(t, id, "confirm")
	env.Answer(t, id, "confirm", true)
	env.WaitForCompletion(t, id)
	env.Golden(t, id, "welcome")
}
