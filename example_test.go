package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
)

// A flow is a plain Go function; its steps, decisions and gates are
// recorded, and a resume re-runs it with what already happened served from
// the log.
func Example() {
	greet := loom.NewStep("greet", func(ctx context.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	flow := loom.NewFlow("welcome", func(ctx *loom.Context, name string) (string, error) {
		msg, err := loom.Run(ctx, greet, name)
		if err != nil {
			return "", err
		}
		ok, err := loom.Suspend[bool](ctx, "confirm")
		if err != nil || !ok {
			return "", err
		}
		return msg + ", confirmed", nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()

	id, _ := rt.Start(ctx, "welcome", "ada", loom.WithExecutionID("welcome-1"))
	st, _ := rt.WaitForSuspend(ctx, id)
	fmt.Println("parked on", st.Variables.SuspendedOn.On)

	_ = rt.Resume(ctx, id, loom.ResumeEvent{EventType: "confirm", Payload: json.RawMessage("true")})
	res, _ := rt.WaitForCompletion(ctx, id)
	fmt.Println(res.Status, string(res.Output))
	// Output:
	// parked on confirm
	// completed "hello ada, confirmed"
}

// Fork copies a parked execution's log into a new execution, here a
// simulation, which a different answer then drives to another outcome.
func ExampleRuntime_Fork() {
	flow := loom.NewFlow("choose", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "pick")
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "choose", nil)
	st, _ := rt.WaitForSuspend(ctx, id)

	branch, _ := rt.Fork(ctx, id, st.Sequence, loom.ForkID("what-if"), loom.SimulateFork())
	_ = rt.Resume(ctx, branch, loom.ResumeEvent{EventType: "pick", Payload: json.RawMessage(`"b"`)})
	_ = rt.Resume(ctx, id, loom.ResumeEvent{EventType: "pick", Payload: json.RawMessage(`"a"`)})
	a, _ := rt.WaitForCompletion(ctx, id)
	b, _ := rt.WaitForCompletion(ctx, branch)
	fmt.Println(string(a.Output), string(b.Output))
	// Output: "a" "b"
}

// Decide records a choice once; every replay is served the same choice.
func ExampleDecide() {
	flow := loom.NewFlow("route", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Decide(ctx, "model", func() (string, error) { return "small", nil })
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	id, _ := rt.Start(context.Background(), "route", nil)
	res, _ := rt.WaitForCompletion(context.Background(), id)
	fmt.Println(string(res.Output), string(res.State.Variables.Decisions["model"].Choice))
	// Output: "small" "small"
}

// Parallel runs branches as goroutines and collects their results in
// branch order.
func ExampleParallel() {
	flow := loom.NewFlow("fan-out", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		square := func(n int) func(*loom.Context) (int, error) {
			return func(c *loom.Context) (int, error) {
				return loom.Decide(c, fmt.Sprintf("square#%d", n), func() (int, error) { return n * n, nil })
			}
		}
		return loom.Parallel(ctx, square(2), square(3), square(4))
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	id, _ := rt.Start(context.Background(), "fan-out", nil)
	res, _ := rt.WaitForCompletion(context.Background(), id)
	fmt.Println(string(res.Output))
	// Output: [4,9,16]
}

// A loop gives every iteration its own step id with Iter: the id is what
// replay serves an outcome by.
func ExampleStep_Iter() {
	double := loom.NewStep("double", func(ctx context.Context, n int) (int, error) { return 2 * n, nil })
	flow := loom.NewFlow("doubles", func(ctx *loom.Context, n int) ([]int, error) {
		var out []int
		for i := 1; i <= n; i++ {
			v, err := loom.Run(ctx, double.Iter(i), i) // "double#1", "double#2", …
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "doubles", 3)
	res, _ := rt.WaitForCompletion(ctx, id)
	fmt.Println(string(res.Output))
	// Output: [2,4,6]
}

// WithCompatibleFingerprints lets new code take over executions recorded
// under an older fingerprint, once it replays their logs unchanged; without
// it they are refused with *FlowCodeMismatchError.
func ExampleWithCompatibleFingerprints() {
	body := func(ctx *loom.Context, _ struct{}) (bool, error) { return loom.Suspend[bool](ctx, "ok") }
	events := memstore.NewEventStore()
	ctx := context.Background()

	v1, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{loom.NewFlow("f", body, loom.WithCodeFingerprint("v1"))}})
	id, _ := v1.Start(ctx, "f", nil)
	_, _ = v1.WaitForSuspend(ctx, id)
	_ = v1.Close()

	strict, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{loom.NewFlow("f", body, loom.WithCodeFingerprint("v2"))}})
	err := strict.Resume(ctx, id, loom.ResumeEvent{EventType: "ok", Payload: json.RawMessage("true")})
	var mismatch *loom.FlowCodeMismatchError
	fmt.Println(errors.As(err, &mismatch), mismatch.Recorded, mismatch.Registered)
	_ = strict.Close()

	compatible, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{
		loom.NewFlow("f", body, loom.WithCodeFingerprint("v2"), loom.WithCompatibleFingerprints("v1"))}})
	defer compatible.Close()
	fmt.Println(compatible.Resume(ctx, id, loom.ResumeEvent{EventType: "ok", Payload: json.RawMessage("true")}))
	res, _ := compatible.WaitForCompletion(ctx, id)
	fmt.Println(res.Status, string(res.Output))
	// Output:
	// true v1 v2
	// <nil>
	// completed true
}

// Ask is a human step: the execution parks until a person answers, and the
// answer is recorded as the step's output.
func ExampleAsk() {
	type approval struct {
		By string `json:"by"`
	}
	flow := loom.NewFlow("refund", func(ctx *loom.Context, cents int) (string, error) {
		a, err := loom.Ask[approval](ctx, "approve-refund")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("refunded %d, approved by %s", cents, a.By), nil
	})
	rt, _ := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "refund", 500)
	st, _ := rt.WaitForSuspend(ctx, id)
	fmt.Println(st.Variables.SuspendedOn.On, st.Variables.SuspendedOn.StepID, st.Frames["approve-refund"].Kind)
	_ = rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve-refund", Payload: json.RawMessage(`{"by":"ann"}`)})
	res, _ := rt.WaitForCompletion(ctx, id)
	fmt.Println(string(res.Output))
	// Output:
	// approve-refund approve-refund human
	// "refunded 500, approved by ann"
}
