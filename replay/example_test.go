package replay_test

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store/memstore"
)

// Check replays the in-flight executions of a store against the code about
// to be deployed: here the deployed code parks after steps a and b, and
// the candidate renamed b.
func ExampleCheck() {
	ctx := context.Background()
	events := memstore.NewEventStore()
	step := func(id string) *loom.Step[string, string] {
		return loom.NewStep(id, func(_ context.Context, in string) (string, error) { return in + id, nil })
	}
	flow := func(second string) *loom.Flow {
		return loom.NewFlow("order", func(ctx *loom.Context, in string) (string, error) {
			out, err := loom.Run(ctx, step("a"), in)
			if err == nil {
				out, err = loom.Run(ctx, step(second), out)
			}
			if err == nil {
				_, err = ctx.Suspend("approve")
			}
			return out, err
		})
	}
	deployed, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow("b")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := deployed.Start(ctx, "order", "x", loom.WithExecutionID("order-1")); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := deployed.WaitForSuspend(ctx, "order-1"); err != nil {
		fmt.Println(err)
		return
	}
	_ = deployed.Close()

	for _, second := range []string{"b", "b-renamed"} {
		rep, err := replay.Check(ctx, events, loom.Config{Flows: []*loom.Flow{flow(second)}}, replay.Options{})
		if err != nil {
			fmt.Println(err)
			return
		}
		x := rep.Executions[0]
		if x.Compatible() {
			fmt.Printf("%s: %s is %s\n", second, x.ExecutionID, x.Verdict)
			continue
		}
		fmt.Printf("%s: %s %s at sequence %d: the log has %s, the candidate %s\n",
			second, x.ExecutionID, x.Verdict, *x.Sequence, x.Expected, x.Got)
	}
	// Output:
	// b: order-1 is compatible
	// b-renamed: order-1 diverged at sequence 3: the log has step "b", the candidate step "b-renamed"
}
