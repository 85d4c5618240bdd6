package loomtest_test

import (
	"context"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/loomtest"
)

// reviewFlow runs step first, then parks on the gate "review".
func reviewFlow(first string) *loom.Flow {
	step := loom.NewStep(first, func(_ context.Context, in string) (string, error) { return in + "!", nil })
	return loom.NewFlow("review", func(ctx *loom.Context, in string) (string, error) {
		out, err := loom.Run(ctx, step, in)
		if err != nil {
			return "", err
		}
		_, err = ctx.Suspend("review")
		return out, err
	})
}

func TestReplayStoredPassesTheSameCodeAndNamesWhatANewOneBreaks(t *testing.T) {
	env := loomtest.New(t, loomtest.WithFlows(reviewFlow("draft")))
	id := env.Start(t, "review", "memo")
	env.WaitForGate(t, id, "review")

	if rep := loomtest.ReplayStored(t, env.Events(), reviewFlow("draft")); rep.Checked != 1 || !rep.OK() {
		t.Fatalf("the same code: %+v", rep)
	}
	r := failing(t, func(tb testing.TB) { loomtest.ReplayStored(tb, env.Events(), reviewFlow("write")) })
	mustContain(t, r, "the new code would not replay "+id, `diverged at sequence 1: expected step "draft", got step "write"`,
		"replay_test.go")
	if r.fatal {
		t.Error("an incompatible execution stopped the test; it should report each and go on")
	}
}
