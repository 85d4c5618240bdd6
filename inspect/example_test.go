package inspect_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store/memstore"
)

// StateAt is time travel over a store: the folded state after any event.
func ExampleSource_StateAt() {
	flow := loom.NewFlow("wait", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "go")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "wait", nil, loom.WithExecutionID("w-1"))
	_, _ = rt.WaitForSuspend(ctx, id)

	src := inspect.Source{Events: events}
	first, _ := src.StateAt(ctx, "w-1", 0)
	latest, _ := src.StateAt(ctx, "w-1", -1)
	fmt.Println(first.Sequence, first.Status)
	fmt.Println(latest.Sequence, latest.Status, latest.Variables.SuspendedOn.On)
	// Output:
	// 0 running
	// 1 suspended go
}

// New serves the web inspector over a Source; PollingFollow lets it follow
// a log that another process writes.
func ExampleNew() {
	events := memstore.NewEventStore()
	in, err := inspect.New(inspect.Source{Events: events, Follow: inspect.PollingFollow(events, 250*time.Millisecond)}, inspect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()
	srv := httptest.NewServer(in)
	defer srv.Close()
	fmt.Println("serving the inspector:", srv.URL != "")
	// Output:
	// serving the inspector: true
}
