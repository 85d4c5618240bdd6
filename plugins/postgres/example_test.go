package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/postgres"
	"github.com/loom-kernel/loom/store"
)

// Storage opens every store of one schema; Close closes them together. (No
// Output comment: the example needs a server, so it is compiled, not run.)
func ExampleStorage() {
	ctx := context.Background()
	st, err := postgres.Storage(ctx, postgres.Options{DSN: os.Getenv("LOOM_POSTGRES_DSN"), Schema: "loom"})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()
	started := event.Envelope{
		ID: "evt-0", WorkflowID: "greet", ExecutionID: "run-1", Type: event.ExecutionStarted,
		Sequence: 0, Timestamp: 1_700_000_000_000, Payload: json.RawMessage(`{"name": "Ada"}`),
	}
	if err := st.Events.Append(ctx, "run-1", 0, []event.Envelope{started}); err != nil {
		panic(err)
	}
	// A stale writer — on this node or any other — is refused, and nothing
	// is written.
	err = st.Events.Append(ctx, "run-1", 0, []event.Envelope{started})
	fmt.Println("stale append refused:", err != nil)
}

// A pool the application already has is borrowed: the stores use it and
// leave it open when they close.
func ExampleStorage_borrowedPool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("LOOM_POSTGRES_DSN"))
	if err != nil {
		panic(err)
	}
	defer pool.Close() // the application's to close, after the stores
	st, err := postgres.Storage(ctx, postgres.Options{Pool: pool})
	if err != nil {
		panic(err)
	}
	// Follow an execution, whichever node appends to it.
	sub, err := st.Events.(store.Subscriber).Subscribe(ctx, "run-1", 0)
	if err != nil {
		panic(err)
	}
	for e := range sub.Events() {
		fmt.Println(e.Sequence, e.Type)
		if e.Type == event.ExecutionCompleted {
			sub.Close()
		}
	}
	if err := st.Close(); err != nil {
		fmt.Println("close:", err)
	}
}
