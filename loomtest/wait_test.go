package loomtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/loomtest"
)

var double = loom.NewStep("double", func(ctx context.Context, n int) (int, error) { return 2 * n, nil })

// review doubles its input, parks on "review", and fails when the answer
// is "reject".
var review = loom.NewFlow("review", func(ctx *loom.Context, n int) (int, error) {
	d, err := loom.Run(ctx, double, n)
	if err != nil {
		return 0, err
	}
	verdict, err := loom.Suspend[string](ctx, "review")
	if err != nil {
		return 0, err
	}
	if verdict == "reject" {
		return 0, errors.New("rejected")
	}
	return d, nil
})

func TestWaits_FollowTheLog(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(review))
	id := env.Start(t, "review", 21)

	if fr := env.WaitForStep(t, id, "double"); fr.Status != fold.FrameCompleted || string(fr.Output) != "42" {
		t.Errorf("step double: %s %s, want completed 42", fr.Status, fr.Output)
	}
	if st := env.WaitForGate(t, id, "review"); st.Variables.SuspendedOn.On != "review" {
		t.Errorf("parked on %+v", st.Variables.SuspendedOn)
	}
	env.Answer(t, id, "review", "ok")
	if res := env.WaitForCompletion(t, id); string(res.Output) != "42" {
		t.Errorf("output %s, want 42", res.Output)
	}

	rejected := env.Start(t, "review", 1)
	env.WaitForGate(t, rejected, "review")
	env.Answer(t, rejected, "review", "reject")
	if st := env.WaitForFailure(t, rejected); len(st.Variables.Error) == 0 {
		t.Error("a failed execution without its recorded error")
	}
}

func TestWaitForGate_ThatNeverComesFailsWithTheStatus(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(review), loomtest.WithWaitTimeout(100*time.Millisecond))
	id := env.Start(t, "review", 2)

	r := failing(t, func(tb testing.TB) { env.WaitForGate(tb, id, "approve") })

	t.Log(r.report())
	mustContain(t, r, `"`+id+`"`, `until it parks on gate "approve"`, "did not happen before the wait's bound",
		`status: suspended, parked on "review"`, "EXECUTION_SUSPENDED", "STEP_COMPLETED")
	if !r.fatal {
		t.Error("a wait that failed let the test go on")
	}
}

func TestWaits_ImpossibleConditionFailsAtOnce(t *testing.T) {
	// No short bound here: each of these must fail on the log, not on time.
	env := loomtest.New(t, loomtest.WithFlows(review))
	id := env.Start(t, "review", 3)
	env.WaitForGate(t, id, "review")
	env.Answer(t, id, "review", "reject")
	env.WaitForFailure(t, id)

	mustContain(t, failing(t, func(tb testing.TB) { env.WaitForCompletion(tb, id) }),
		"until it completes", "it ended failed", "status: failed", "rejected", "EXECUTION_FAILED")
	mustContain(t, failing(t, func(tb testing.TB) { env.WaitForGate(tb, id, "approve") }),
		"it ended failed without parking on the gate")
	mustContain(t, failing(t, func(tb testing.TB) { env.WaitForStep(tb, id, "missing") }),
		`step "missing" has an outcome`, "without an outcome of the step")
}

func TestWaits_AnExecutionThatNeverStarted(t *testing.T) {
	env := loomtest.New(t, loomtest.WithWaitTimeout(50*time.Millisecond))
	mustContain(t, failing(t, func(tb testing.TB) { env.WaitForSettled(tb, "nobody") }),
		`"nobody"`, "no durable event")
}
