package loom_test

import (
	"context"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
)

// After a ResumeAs onto another flow, a later resume drives the target
// flow, also without a snapshot store (the log alone says which flow).
func TestAResumeAfterOntoFlowDrivesTheTargetFlowWithoutSnapshots(t *testing.T) {
	v1 := loom.NewFlow("v1", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := ctx.Suspend("a"); err != nil {
			return "", err
		}
		return "v1", nil
	})
	v2 := loom.NewFlow("v2", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := ctx.Suspend("a"); err != nil {
			return "", err
		}
		if _, err := ctx.Suspend("b"); err != nil {
			return "", err
		}
		return "v2", nil
	})
	events := memstore.NewEventStore()
	cfg := loom.Config{Events: events, Flows: []*loom.Flow{v1, v2}, StickyParks: -1}
	cfg.Recovery.Disabled = true
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, _ := rt.Start(ctx, "v1", nil)
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.ResumeAs(ctx, id, loom.ResumeEvent{EventType: "a"}, loom.OntoFlow("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	_ = rt.Close()
	rt2, _ := loom.New(cfg)
	defer rt2.Close()
	if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "b"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"v2"` {
		t.Fatalf("result %s, %v; want v2's", res.Output, err)
	}
	if got, _ := rt2.FlowOf(ctx, id); got != "v2" {
		t.Fatalf("FlowOf = %s", got)
	}
}
