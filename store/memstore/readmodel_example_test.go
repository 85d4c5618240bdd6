package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// ExampleNewReadModelStore folds two steps of a projection into read-model
// rows, queries them by an indexed field, and shows that a second node
// applying the same step again is refused by the watermark, writing
// nothing.
func ExampleNewReadModelStore() {
	ctx := context.Background()
	s := memstore.NewReadModelStore()

	// Step 1: events 0..2 of execution order-42 opened two orders.
	err := s.Apply(ctx, "orders", "order-42", store.NoWatermark, 2, []store.ReadModelWrite{
		{Row: store.ReadModel{Kind: "order", ID: "o-1", Fields: map[string]string{"status": "open"},
			Doc: json.RawMessage(`{"total":12.50}`)}},
		{Row: store.ReadModel{Kind: "order", ID: "o-2", Fields: map[string]string{"status": "open"},
			Doc: json.RawMessage(`{"total":99.00}`)}},
	})
	if err != nil {
		fmt.Println("apply:", err)
		return
	}
	// Step 2: event 3 shipped o-1, which the projection read at version 1.
	err = s.Apply(ctx, "orders", "order-42", 2, 3, []store.ReadModelWrite{
		{Row: store.ReadModel{Kind: "order", ID: "o-1", Fields: map[string]string{"status": "shipped"},
			Doc: json.RawMessage(`{"total":12.50}`)}, ExpectVersion: 1},
	})
	if err != nil {
		fmt.Println("apply:", err)
		return
	}

	page, err := s.Query(ctx, store.ReadModelQuery{Kind: "order", Where: map[string]string{"status": "open"}})
	if err != nil {
		fmt.Println("query:", err)
		return
	}
	for _, r := range page.Rows {
		fmt.Println(r.ID, r.Fields["status"], string(r.Doc), "version", r.Version)
	}
	shipped, _, _ := s.Get(ctx, "order", "o-1")
	fmt.Println(shipped.ID, shipped.Fields["status"], "version", shipped.Version)

	// Another node folded step 2 too, from the same watermark: it lost.
	err = s.Apply(ctx, "orders", "order-42", 2, 3, nil)
	var wc *store.WatermarkConflictError
	fmt.Println("replayed step refused:", errors.As(err, &wc), "watermark is", wc.Actual)
	// Output:
	// o-2 open {"total":99.00} version 1
	// o-1 shipped version 2
	// replayed step refused: true watermark is 3
}
