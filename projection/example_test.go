package projection_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// A projection keeps a row per order, indexed by status, from the events
// the order flow emits; a query then finds the orders by status.
func ExampleNew() {
	ctx := context.Background()
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	flow := loom.NewFlow("order", func(c *loom.Context, item string) (string, error) {
		return "ok", c.Emit("order.placed", map[string]string{"item": item})
	})
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	for _, id := range []string{"o-1", "o-2"} {
		_, _ = rt.Start(ctx, "order", "tea", loom.WithExecutionID(id))
		_, _ = rt.WaitForCompletion(ctx, id)
	}

	orders := projection.Projection{Name: "orders", Handle: func(tx *projection.Tx, e event.Envelope) error {
		if e.Type == "order.placed" {
			tx.Put(store.ReadModel{Kind: "order", ID: e.ExecutionID, Fields: map[string]string{"status": "placed"}, Doc: e.Payload})
		}
		return nil
	}}
	r, err := projection.New(events, models, orders)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := r.CatchUp(ctx)
	page, _ := r.Query(ctx, store.ReadModelQuery{Kind: "order", Where: map[string]string{"status": "placed"}})
	for _, row := range page.Rows {
		var doc map[string]string
		_ = json.Unmarshal(row.Doc, &doc)
		fmt.Println(row.ID, doc["item"])
	}
	fmt.Println(res.Executions, "executions caught up")
	// Output:
	// o-1 tea
	// o-2 tea
	// 2 executions caught up
}

// A live query delivers a read-model page when it changes: first as it
// stands (empty here), then again once a projection folds a new order.
func ExampleWatchQuery() {
	ctx := context.Background()
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	flow := loom.NewFlow("order", func(c *loom.Context, item string) (string, error) {
		return "ok", c.Emit("order.placed", map[string]string{"item": item})
	})
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	orders := projection.Projection{Name: "orders", Handle: func(tx *projection.Tx, e event.Envelope) error {
		if e.Type == "order.placed" {
			tx.Put(store.ReadModel{Kind: "order", ID: e.ExecutionID, Fields: map[string]string{"status": "placed"}, Doc: e.Payload})
		}
		return nil
	}}
	r, _ := projection.New(events, models, orders)

	w, err := projection.WatchQuery(ctx, models, store.ReadModelQuery{Kind: "order"}, projection.LiveOptions{Changes: r})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	first := <-w.Updates()
	fmt.Println(len(first.Page.Rows), "orders")

	_, _ = rt.Start(ctx, "order", "tea", loom.WithExecutionID("o-1"))
	_, _ = rt.WaitForCompletion(ctx, "o-1")
	if _, err := r.CatchUpExecution(ctx, "o-1"); err != nil { // wakes the query at once
		fmt.Println(err)
		return
	}
	next := <-w.Updates()
	fmt.Println(len(next.Page.Rows), "order:", next.Page.Rows[0].ID, next.Digest != first.Digest)
	// Output:
	// 0 orders
	// 1 order: o-1 true
}
