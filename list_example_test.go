package loom_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store/memstore"
)

// List pages the store in id order, each execution with its folded
// status; a filter applies within each store page, so a page may be short
// while Next says more follow.
func ExampleRuntime_List() {
	flow := loom.NewFlow("approval", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Suspend[bool](ctx, "approve")
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	for _, id := range []string{"order-1", "order-2", "order-3"} {
		_, _ = rt.Start(ctx, "approval", nil, loom.WithExecutionID(id))
		_, _ = rt.WaitForSuspend(ctx, id)
	}
	_ = rt.Resume(ctx, "order-2", loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")})
	_, _ = rt.WaitForCompletion(ctx, "order-2")

	for q := (loom.ListQuery{Limit: 2}); ; {
		page, _ := rt.List(ctx, q)
		for _, x := range page.Executions {
			if x.SuspendedOn != "" {
				fmt.Println(x.ExecutionID, x.Status, "on", x.SuspendedOn)
				continue
			}
			fmt.Println(x.ExecutionID, x.Status)
		}
		if q.After = page.Next; q.After == "" {
			break
		}
	}
	parked, _ := rt.List(ctx, loom.ListQuery{Limit: 2, Status: fold.StatusSuspended})
	fmt.Println(len(parked.Executions), "parked in the first page; next:", parked.Next)
	// Output:
	// order-1 suspended on approve
	// order-2 completed
	// order-3 suspended on approve
	// 1 parked in the first page; next: order-2
}
