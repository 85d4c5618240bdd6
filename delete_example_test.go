package loom_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
)

// DeleteExecution removes one ended execution with what is kept for it; a
// dry run says what would go, and an execution that has not ended is
// refused, nothing deleted.
func ExampleRuntime_DeleteExecution() {
	done := loom.NewFlow("done", func(ctx *loom.Context, n int) (int, error) { return n, nil })
	waits := loom.NewFlow("waits", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Suspend[bool](ctx, "approve")
	})
	rt, _ := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{done, waits}})
	defer rt.Close()
	ctx := context.Background()
	_, _ = rt.Start(ctx, "done", 7, loom.WithExecutionID("order-1"))
	_, _ = rt.WaitForCompletion(ctx, "order-1")
	_, _ = rt.Start(ctx, "waits", nil, loom.WithExecutionID("order-2"))
	_, _ = rt.WaitForSuspend(ctx, "order-2")

	dry, _ := rt.DeleteExecution(ctx, "order-1", true)
	fmt.Println("a dry run would delete", dry.Events, "events of", dry.ExecutionID)
	if _, err := rt.DeleteExecution(ctx, "order-1", false); err == nil {
		_, err := rt.LoadState(ctx, "order-1")
		fmt.Println("deleted:", errors.Is(err, loom.ErrExecutionNotFound))
	}
	var refused *loom.DeleteRefusedError
	if _, err := rt.DeleteExecution(ctx, "order-2", false); errors.As(err, &refused) {
		fmt.Println("order-2 kept:", refused.Reason)
	}
	// Output:
	// a dry run would delete 2 events of order-1
	// deleted: true
	// order-2 kept: not-ended
}
