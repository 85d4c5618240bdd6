package saga_test

import (
	"context"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/saga"
	"github.com/loom-kernel/loom/store/memstore"
)

// A trip books a flight and a hotel; the hotel refuses (a typed failure,
// so the refusal is durable), and the flight is cancelled.
func ExampleRun() {
	flight := loom.NewStep("flight", func(context.Context, string) (string, error) { return "LH-1", nil })
	hotel := loom.NewStep("hotel", func(context.Context, string) (string, error) {
		return "", loom.Fail("full", map[string]string{"hotel": "Ritz"})
	}, loom.ErrorChannel("full", `{"type":"object"}`))
	cancelFlight := loom.NewStep("cancel-flight", func(_ context.Context, u saga.Undo[string, string]) (string, error) {
		return "cancelled " + u.Output, nil
	})
	noop := loom.NewStep("noop", func(context.Context, saga.Undo[string, string]) (bool, error) { return true, nil })
	flow := loom.NewFlow("trip", func(c *loom.Context, who string) (string, error) {
		s := saga.New(c)
		if _, err := saga.Run(s, flight, who, cancelFlight); err != nil {
			return "", s.Compensate(err)
		}
		if _, err := saga.Run(s, hotel, who, noop); err != nil {
			return "", s.Compensate(err)
		}
		return "booked", nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	_, _ = rt.Start(ctx, "trip", "ada", loom.WithExecutionID("trip-1"))
	res, _ := rt.WaitForCompletion(ctx, "trip-1")
	st, _ := rt.LoadState(ctx, "trip-1")
	fmt.Println(res.Status, string(st.Frames[saga.CompensationID("flight")].Output))
	// Output: failed "cancelled LH-1"
}
