package loom_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
)

func TestNegotiateBudgetIsARecordedBoundedGrant(t *testing.T) {
	var grants []float64
	flow := loom.NewFlow("budget", func(ctx *loom.Context, _ struct{}) (float64, error) {
		g, err := ctx.NegotiateBudget(loom.BudgetRequest{Dimension: "tokens", Request: 5000, Max: 1200})
		if err != nil {
			return 0, err
		}
		grants = append(grants, g)
		if _, err := ctx.Suspend("go"); err != nil {
			return 0, err
		}
		return g, nil
	})
	h := newHarnessWith(t, replaying, flow)
	id, _ := h.rt.Start(h.ctx(), "budget", nil)
	resume(t, h, id, "go", "1")
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "1200" || len(grants) != 2 || grants[0] != grants[1] {
		t.Fatalf("%s %v %v", res.Output, grants, err)
	}
	if _, ok := res.State.Variables.Decisions["__loom_budget:tokens#0"]; !ok {
		t.Fatalf("grant not recorded: %v", res.State.Variables.Decisions)
	}
}

func TestDivergenceWarnModeLogsAndGoesOn(t *testing.T) {
	var buf bytes.Buffer
	var mu syncWriter
	mu.w = &buf
	var second atomic.Bool
	flow := loom.NewFlow("drift", func(ctx *loom.Context, _ struct{}) (int, error) {
		id := "a"
		if second.Load() {
			id = "b"
		}
		if _, err := ctx.Run(id, func(context.Context) (any, error) { return 1, nil }); err != nil {
			return 0, err
		}
		_, err := ctx.Suspend("go")
		return 1, err
	})
	h := newHarnessWith(t, loom.Config{StickyParks: -1, Divergence: loom.DivergenceWarn, Logger: slog.New(slog.NewTextHandler(&mu, nil))}, flow)
	id, _ := h.rt.Start(h.ctx(), "drift", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	second.Store(true)
	resume(t, h, id, "go", "1")
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, ran := res.State.Frames["b"]; !ran {
		t.Fatal("warn mode must go on and run the new step")
	}
	if !strings.Contains(mu.String(), "replay diverged") {
		t.Fatalf("no warning logged: %q", mu.String())
	}
}

func TestDecideRefusesReservedIDs(t *testing.T) {
	var got error
	flow := loom.NewFlow("reserved", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, got = ctx.Decide("__loom_verdict:x#1", func() (any, error) { return "done", nil })
		return 0, nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "reserved", nil)
	res, _ := h.rt.WaitForCompletion(h.ctx(), id)
	if got != loom.ErrReservedDecisionID || len(res.State.Variables.Decisions) != 0 {
		t.Fatalf("err %v, decisions %v", got, res.State.Variables.Decisions)
	}
}
