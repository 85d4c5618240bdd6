package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
)

type lineOrder struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

func lineOrderFlow() *loom.Flow {
	return loom.NewFlow("order", func(ctx *loom.Context, o lineOrder) (int, error) {
		if o.Item == "cancel-me" {
			_, err := ctx.Suspend("never")
			return 0, err
		}
		return o.Qty * 2, nil
	})
}

func TestStartRefusesAnInputItsFlowCannotDecodeWithNothingAppended(t *testing.T) {
	flow := lineOrderFlow()
	h := newHarness(t, flow)
	for _, bad := range []any{"a string", 42, json.RawMessage(`{"qty":"many"}`)} {
		_, err := h.rt.Start(h.ctx(), "order", bad, loom.WithExecutionID("refused"))
		var ite *loom.InputTypeError
		if !errors.As(err, &ite) || ite.Want != "loom_test.lineOrder" {
			t.Fatalf("start with %v = %v, want *InputTypeError", bad, err)
		}
	}
	if evs, _ := store.Read(h.ctx(), h.events, "refused"); len(evs) != 0 {
		t.Fatalf("a refused start appended %d events", len(evs))
	}
	// What decodes into the input type is taken: a map, JSON, the type itself.
	for _, good := range []any{lineOrder{Item: "a", Qty: 1}, &lineOrder{Qty: 2}, map[string]any{"qty": 3}, json.RawMessage(`{"qty":4}`), nil} {
		if _, err := h.rt.Start(h.ctx(), "order", good); err != nil {
			t.Fatalf("start with %v: %v", good, err)
		}
	}
}

func TestStartFlowAndAwaitAreTyped(t *testing.T) {
	flow := lineOrderFlow()
	h := newHarness(t, flow)
	ctx := h.ctx()
	id, err := loom.StartFlow[lineOrder, int](ctx, h.rt, flow, lineOrder{Item: "bolt", Qty: 21})
	if err != nil {
		t.Fatal(err)
	}
	n, err := loom.Await[int](ctx, h.rt, id)
	if err != nil || n != 42 {
		t.Fatalf("await = %d, %v", n, err)
	}
	// Type parameters that are not the flow's own are refused.
	var fte *loom.FlowTypeError
	if _, err := loom.StartFlow[string, int](ctx, h.rt, flow, "x"); !errors.As(err, &fte) || fte.Parameter != "In" {
		t.Fatalf("StartFlow[string, int] = %v", err)
	}
	if _, err := loom.StartFlow[lineOrder, string](ctx, h.rt, flow, lineOrder{}); !errors.As(err, &fte) || fte.Parameter != "Out" {
		t.Fatalf("StartFlow[lineOrder, string] = %v", err)
	}
	// A flow that is not registered here is refused, naming what is.
	if _, err := loom.StartFlow[lineOrder, int](ctx, h.rt, lineOrderFlow(), lineOrder{}); !errors.Is(err, loom.ErrUnknownFlow) {
		t.Fatalf("an unregistered flow = %v", err)
	}
	// A cancelled execution is a typed error, not a zero value.
	id, _ = loom.StartFlow[lineOrder, int](ctx, h.rt, flow, lineOrder{Item: "cancel-me"})
	if _, err := h.rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Cancel(ctx, id, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	var ce *loom.ExecutionCancelledError
	if _, err := loom.Await[int](ctx, h.rt, id); !errors.As(err, &ce) || ce.Reason != "changed my mind" {
		t.Fatalf("await of a cancelled execution = %v", err)
	}
}

func TestAwaitOfAFailedExecutionIsFlowFailed(t *testing.T) {
	flow := loom.NewFlow("fails", func(ctx *loom.Context, _ struct{}) (int, error) { return 0, errors.New("nope") })
	h := newHarness(t, flow)
	id, _ := h.rt.Start(context.Background(), "fails", nil)
	var ff *loom.FlowFailedError
	if _, err := loom.Await[int](h.ctx(), h.rt, id); !errors.As(err, &ff) || ff.Message != "nope" {
		t.Fatalf("await = %v", err)
	}
}
