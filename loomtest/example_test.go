package loomtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/loomtest"
)

// exampleT stands in for the *testing.T an Example has not got: in your
// tests, pass the t of the test function instead.
type exampleT struct {
	testing.TB // unused; only the methods below are called
	ctx        context.Context
	cancel     context.CancelFunc
	cleanups   []func()
	dirs       []string
	failed     bool
}

func newExampleT() *exampleT {
	ctx, cancel := context.WithCancel(context.Background())
	return &exampleT{ctx: ctx, cancel: cancel}
}

// finish runs the cleanups, as the end of a test does.
func (t *exampleT) finish() {
	t.cancel()
	for _, f := range slices.Backward(t.cleanups) {
		f()
	}
	for _, d := range t.dirs {
		_ = os.RemoveAll(d)
	}
}

func (t *exampleT) Helper()                         {}
func (t *exampleT) Name() string                    { return "Example" }
func (t *exampleT) Context() context.Context        { return t.ctx }
func (t *exampleT) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Logf(format string, args ...any) {}
func (t *exampleT) Log(args ...any)                 {}
func (t *exampleT) Errorf(format string, args ...any) {
	t.failed = true
	fmt.Printf(format+"\n", args...)
}
func (t *exampleT) Error(args ...any)                 { t.failed = true; fmt.Println(args...) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleT) Failed() bool                      { return t.failed }
func (t *exampleT) TempDir() string {
	d, err := os.MkdirTemp("", "loomtest-example")
	if err != nil {
		panic(err)
	}
	t.dirs = append(t.dirs, d)
	return d
}

// greet and welcome are the flow most examples test: a step, then a gate.
var (
	greet = loom.NewStep("greet", func(ctx context.Context, name string) (string, error) {
		return "hello " + name, nil
	}, loom.ToolID("greeter"))
	welcome = loom.NewFlow("welcome", func(ctx *loom.Context, name string) (string, error) {
		msg, err := loom.Run(ctx, greet, name)
		if err != nil {
			return "", err
		}
		ok, err := loom.Suspend[bool](ctx, "confirm")
		if err != nil || !ok {
			return msg + ", unconfirmed", err
		}
		return msg + ", confirmed", nil
	})
)

// New builds a runtime over memory stores with the flows registered;
// the test's cleanup closes it.
func ExampleNew() {
	t := newExampleT() // in a test: the test's t
	defer t.finish()

	env := loomtest.New(t, loomtest.WithFlows(welcome))
	id := env.Start(t, "welcome", "ada")
	env.WaitForGate(t, id, "confirm")
	env.Answer(t, id, "confirm", true)
	res := env.WaitForCompletion(t, id)
	fmt.Println(res.Status, string(res.Output))
	// Output: completed "hello ada, confirmed"
}

// A Clock moves only when the test moves it.
func ExampleClock() {
	c := loomtest.NewClock(time.Time{}) // at Epoch
	fmt.Println(c.Now().Format(time.RFC3339))
	c.Advance(36 * time.Hour)
	fmt.Println(c.Now().Format(time.RFC3339))
	c.Set(time.Date(2027, time.March, 1, 9, 0, 0, 0, time.UTC))
	fmt.Println(c.Now().Format(time.RFC3339))
	// Output:
	// 2026-01-01T00:00:00Z
	// 2026-01-02T12:00:00Z
	// 2027-03-01T09:00:00Z
}

// SkipTime fires each timer at its wakeAt, in order: a flow that sleeps
// for thirty days completes at once.
func ExampleEnv_SkipTime() {
	t := newExampleT()
	defer t.finish()
	reminder := loom.NewFlow("reminder", func(ctx *loom.Context, _ struct{}) (string, error) {
		if err := ctx.Sleep(30 * 24 * time.Hour); err != nil {
			return "", err
		}
		return "remind at " + loom.Now(ctx).UTC().Format(time.DateOnly), nil
	})

	env := loomtest.New(t, loomtest.WithFlows(reminder))
	id := env.Start(t, "reminder", nil)
	st := env.SkipTime(t, id)
	fmt.Println(st.Status, string(st.Variables.Output))
	// Output: completed "remind at 2026-01-31"
}

// AdvanceTime lets a given span pass, firing what falls due in it: here a
// gate's one-hour timeout.
func ExampleEnv_AdvanceTime() {
	t := newExampleT()
	defer t.finish()
	ask := loom.NewFlow("ask", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := ctx.Suspend("answer", loom.Timeout(time.Hour)); err != nil {
			return "", err
		}
		return "answered or timed out at " + loom.Now(ctx).UTC().Format(time.TimeOnly), nil
	})

	env := loomtest.New(t, loomtest.WithFlows(ask))
	id := env.Start(t, "ask", nil)
	env.WaitForGate(t, id, "answer")
	env.AdvanceTime(t, 2*time.Hour)
	fmt.Println(string(env.WaitForCompletion(t, id).Output))
	fmt.Println(env.Clock().Now().Format(time.TimeOnly))
	// Output:
	// "answered or timed out at 01:00:00"
	// 02:00:00
}

// The waits follow the durable log and fail the test, with the
// execution's status and last events, when what they wait for cannot or
// does not happen.
func ExampleEnv_WaitForGate() {
	t := newExampleT()
	defer t.finish()
	env := loomtest.New(t, loomtest.WithFlows(welcome))
	id := env.Start(t, "welcome", "grace")

	fr := env.WaitForStep(t, id, "greet")
	st := env.WaitForGate(t, id, "confirm")
	fmt.Println(fr.Status, string(fr.Output))
	fmt.Println(st.Status, "on", st.Variables.SuspendedOn.On)
	// Output:
	// completed "hello grace"
	// suspended on confirm
}

// A mock replaces the effect of a tool id and counts its calls.
func ExampleNewMock() {
	t := newExampleT()
	defer t.finish()
	greeter := loomtest.NewMock("greeter", func(ctx context.Context, name string) (string, error) {
		return "hi " + name, nil
	})

	env := loomtest.New(t, loomtest.WithFlows(welcome), loomtest.WithMocks(greeter))
	id := env.Start(t, "welcome", "alan")
	env.WaitForGate(t, id, "confirm")
	env.Answer(t, id, "confirm", false) // the resume replays the flow
	fmt.Println(string(env.WaitForCompletion(t, id).Output))
	fmt.Println(greeter.Count(), string(greeter.Calls()[0].Input))
	// Output:
	// "hi alan, unconfirmed"
	// 1 "alan"
}

// Restart stands in for the next process after a crash: it recovers, and
// the steps the log holds are served, not run again.
func ExampleEnv_Restart() {
	t := newExampleT()
	defer t.finish()
	var (
		env   *loomtest.Env
		crash sync.Once
	)
	greeter := loomtest.NewMock("greeter", func(ctx context.Context, name string) (string, error) {
		crash.Do(env.CrashAtNextAppend) // the first process dies before this step's outcome is written
		return "hello " + name, nil
	})
	env = loomtest.New(t, loomtest.WithFlows(welcome), loomtest.WithMocks(greeter))
	id := env.Start(t, "welcome", "edsger")
	env.WaitForCrash(t)

	fmt.Println("recovered:", env.Restart(t))
	env.WaitForGate(t, id, "confirm")
	env.Answer(t, id, "confirm", true)
	fmt.Println(string(env.WaitForCompletion(t, id).Output))
	fmt.Println("greeter ran", greeter.Count(), "times") // its outcome was lost with the first process
	// Output:
	// recovered: 1
	// "hello edsger, confirmed"
	// greeter ran 2 times
}

// Cassette replays a recorded model so agent flows run offline; record it
// once with -loomtest.record and the live provider.
func ExampleCassette() {
	t := newExampleT()
	defer t.finish()
	live := func() (llm.Provider, error) { return nil, fmt.Errorf("only with -loomtest.record") } // e.g. anthropic.New(...)
	model := loomtest.Cassette(t, filepath.Join("testdata", "cassettes", "advice.json"), live)
	advise := loom.NewFlow("advise", func(ctx *loom.Context, symptom string) (string, error) {
		resp, err := llm.Complete(ctx, "advice", model, llm.Request{
			Model:    "claude-sonnet-4-5",
			System:   "You are the on-call assistant.",
			Messages: []llm.Message{llm.UserText(symptom)},
		})
		return resp.Text, err
	})

	env := loomtest.New(t, loomtest.WithFlows(advise))
	id := env.Start(t, "advise", "checkout p99 is 2.4 s since the 14:02 deploy")
	fmt.Println(string(env.WaitForCompletion(t, id).Output))
	// Output: "Roll back v42."
}

// Golden compares an execution's log with testdata/<name>.golden.jsonl;
// go test -loomtest.update records it.
func ExampleEnv_Golden() {
	t := newExampleT()
	defer t.finish()
	env := loomtest.New(t, loomtest.WithFlows(welcome))
	id := env.Start(t, "welcome", "ada")
	env.WaitForGate(t, id, "confirm")
	env.Answer(t, id, "confirm", true)
	env.WaitForCompletion(t, id)

	env.Golden(t, id, "welcome") // testdata/welcome.golden.jsonl
	fmt.Println("matches:", !t.Failed())
	// Output: matches: true
}
