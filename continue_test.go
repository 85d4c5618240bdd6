package loom_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

var chainOn = loom.Config{Features: loom.Features{ContinueAsNew: true, Inbox: true}}

// counter continues as new every iteration until it reaches its input's
// limit, metering one token per iteration.
func counter(limit int, steps *atomic.Int64) *loom.Flow {
	type in struct{ I, Limit int }
	return loom.NewFlow("counter", func(ctx *loom.Context, x in) (int, error) {
		if x.Limit == 0 {
			x.Limit = limit
		}
		if _, err := ctx.Run("tick", func(context.Context) (any, error) { steps.Add(1); return x.I, nil }); err != nil {
			return 0, err
		}
		if err := ctx.Emit(event.ResourceMetered, map[string]any{"tokens": 1}); err != nil {
			return 0, err
		}
		if x.I+1 >= x.Limit {
			return x.I + 1, nil
		}
		return 0, ctx.ContinueAsNew(in{I: x.I + 1, Limit: x.Limit})
	})
}

func TestContinueAsNewChainsExecutionsWithACarry(t *testing.T) {
	var steps atomic.Int64
	h := newHarnessWith(t, chainOn, counter(5, &steps))
	id, _ := h.rt.Start(h.ctx(), "counter", map[string]int{"I": 0}, loom.WithExecutionID("c"))
	res, err := h.rt.WaitForChain(h.ctx(), id)
	if err != nil || string(res.Output) != "5" || steps.Load() != 5 {
		t.Fatalf("%s %v steps %d", res.Output, err, steps.Load())
	}
	if r := res.State.Variables.Resources; r == nil || *r.Tokens != 5 {
		t.Fatalf("the carry lost the resources: %+v", r)
	}
	first := fold.Fold(h.log(id))
	if first.Status != fold.StatusContinued || first.Variables.ContinuedTo != "c~1" {
		t.Fatalf("first link %s → %q", first.Status, first.Variables.ContinuedTo)
	}
	if n := len(h.log("c~2")); n > 8 {
		t.Fatalf("a link holds %d events: history must stay bounded", n)
	}
}

func TestContinueAsNewIsOffByDefault(t *testing.T) {
	var steps atomic.Int64
	h := newHarness(t, counter(3, &steps))
	id, _ := h.rt.Start(h.ctx(), "counter", nil)
	_, err := h.rt.WaitForCompletion(h.ctx(), id)
	var fe *loom.FlowFailedError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
}

func TestContinueAsNewSuccessorIsStartedByRecover(t *testing.T) {
	var steps atomic.Int64
	h := newHarnessWith(t, chainOn, counter(2, &steps))
	id, _ := h.rt.Start(h.ctx(), "counter", nil, loom.WithExecutionID("r"))
	if _, err := h.rt.WaitForChain(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	// Simulate a process that stopped between the two: delete the successor.
	if err := h.events.DeleteExecution(h.ctx(), "r~1"); err != nil {
		t.Fatal(err)
	}
	other := h.open(counter(2, &steps))
	if n, err := other.Recover(h.ctx()); err != nil || n != 1 {
		t.Fatalf("recovered %d: %v", n, err)
	}
	if res, err := other.WaitForChain(h.ctx(), id); err != nil || string(res.Output) != "2" {
		t.Fatalf("%s %v", res.Output, err)
	}
}

func TestSendFollowsTheChainToItsLiveHead(t *testing.T) {
	flow := loom.NewFlow("relay", func(ctx *loom.Context, n int) (int, error) {
		v, err := loom.Receive[int](ctx, "in")
		if err != nil {
			return 0, err
		}
		if n == 1 {
			return v, nil
		}
		return 0, ctx.ContinueAsNew(1)
	})
	h := newHarnessWith(t, chainOn, flow)
	id, _ := h.rt.Start(h.ctx(), "relay", 0, loom.WithExecutionID("relay"))
	if err := h.rt.Send(h.ctx(), id, "in", 10); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, "relay~1", func(s fold.State) bool { return s.Status == fold.StatusSuspended })
	// Addressed to the first link, the message reaches the head, which
	// reads the chain's stream from the carried cursor.
	if err := h.rt.Send(h.ctx(), id, "in", 20); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForChain(h.ctx(), id); err != nil || string(res.Output) != "20" {
		t.Fatalf("%s %v", res.Output, err)
	}
}

// A perpetual flow runs 10,000 iterations with bounded history per
// execution and flat memory in the runtime.
func TestContinueAsNewPerpetualFlowHasFlatMemory(t *testing.T) {
	var steps atomic.Int64
	h := newHarnessWith(t, chainOn, counter(10_000, &steps))
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	id, _ := h.rt.Start(h.ctx(), "counter", nil, loom.WithExecutionID("p"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := h.rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitLink(t, h, "p~1000")
	early := heap()
	res, err := h.rt.WaitForChain(ctx, id)
	if err != nil || string(res.Output) != "10000" {
		t.Fatalf("%s %v", res.Output, err)
	}
	late := heap()
	// The memory store keeps every link (~9,000 more of them, ~1 KiB each);
	// anything the runtime kept per execution would add far more.
	if late > early+40<<20 {
		t.Fatalf("heap grew from %d to %d bytes over 9,000 iterations", early, late)
	}
	if n := len(h.log("p~5000")); n > 8 {
		t.Fatalf("link holds %d events", n)
	}
}

// waitLink waits until the execution id exists and has ended.
func waitLink(t *testing.T, h *harness, id string) {
	t.Helper()
	waitUntil(t, h, id, func(s fold.State) bool { return s.Status.Terminal() })
}
