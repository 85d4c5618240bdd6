package durable_test

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/durable"
	"github.com/loom-kernel/loom/store/memstore"
)

// A flow reads and writes shared keyed state as recorded steps: a replay
// sees the values it saw, whatever the store holds by then.
func ExampleNew() {
	ctx := context.Background()
	stock, _ := durable.New[int](memstore.NewReadModelStore(), "stock")
	flow := loom.NewFlow("restock", func(c *loom.Context, n int) (int, error) {
		v, err := stock.Get(c, "read", "tea")
		if err != nil {
			return 0, err
		}
		w, err := stock.Put(c, "write", "tea", v.Value+n, v.Revision) // refused if someone wrote in between
		return w.Value, err
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	for _, id := range []string{"r-1", "r-2"} {
		_, _ = rt.Start(ctx, "restock", 5, loom.WithExecutionID(id))
		res, _ := rt.WaitForCompletion(ctx, id)
		fmt.Println(id, string(res.Output))
	}
	v, _ := stock.Peek(ctx, "tea")
	fmt.Println("tea:", v.Value, "at revision", v.Revision)
	// Output:
	// r-1 5
	// r-2 10
	// tea: 10 at revision 2
}
