package loom_test

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
)

// CheckExecution asks, before a deploy or from an operator's console,
// whether a stored execution replays under the code registered now: here
// the next release renamed a step the log already holds.
func ExampleRuntime_CheckExecution() {
	step := func(id string) *loom.Step[int, int] {
		return loom.NewStep(id, func(_ context.Context, n int) (int, error) { return n + 1, nil })
	}
	release := func(second string) *loom.Flow {
		return loom.NewFlow("score", func(ctx *loom.Context, n int) (int, error) {
			for _, id := range []string{"fetch", second} {
				n, _ = loom.Run(ctx, step(id), n)
			}
			_, err := ctx.Suspend("ok")
			return n, err
		})
	}
	events := memstore.NewEventStore()
	ctx := context.Background()
	v1, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{release("score")}})
	id, _ := v1.Start(ctx, "score", 1, loom.WithExecutionID("s-1"))
	_, _ = v1.WaitForSuspend(ctx, id)
	_ = v1.Close()

	v2, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{release("rank")}})
	defer v2.Close()
	rep, _ := v2.CheckExecution(ctx, "s-1")
	fmt.Println(rep.Verdict, *rep.Sequence)
	fmt.Println(rep.Expected, "→", rep.Got)
	// Output:
	// diverged 3
	// step "score" → step "rank"
}
