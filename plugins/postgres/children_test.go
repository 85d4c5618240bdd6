package postgres

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
)

// TestChildOnAnotherNodeWakesItsParent: two runtimes (nodes) share one
// schema. Node A starts a parent, which spawns a child and parks awaiting
// it; the child parks on a gate. Node B answers the child's gate, drives
// it to its end, and its supervisor wakes the parent through the store:
// the parent completes with the child's output though node A never hears
// of it.
func TestChildOnAnotherNodeWakesItsParent(t *testing.T) {
	schema := newSchema(t)
	held := loom.NewFlow("held", func(c *loom.Context, n int) (int, error) { return loom.Suspend[int](c, "release") })
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "held", "h", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	node := func() *loom.Runtime {
		st, err := Storage(context.Background(), testOptions(t, schema))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{held, parent}, Features: loom.Features{Children: true},
			Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rt.Close()
			_ = st.Close()
		})
		return rt
	}
	a, b := node(), node()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.Start(ctx, "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p", "p/h"} {
		if _, err := a.WaitForSuspend(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Resume(ctx, "p/h", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`42`)}); err != nil {
		t.Fatal(err)
	}
	// B drives the child and then the parent; A's view is the store's.
	res, err := b.WaitForCompletion(ctx, "p")
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != "42" {
		t.Fatalf("parent on node B: %v %s, %v; want completed with 42", res.Status, res.Output, err)
	}
	if st, err := a.LoadState(ctx, "p"); err != nil || st.Status != fold.StatusCompleted {
		t.Fatalf("node A reads the parent as %v, %v", st.Status, err)
	}
}
