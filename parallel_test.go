package loom_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func TestParallelSuspendStopsSiblingsAndReplaysByStepID(t *testing.T) {
	var runs atomic.Int64
	release := make(chan struct{})
	flow := loom.NewFlow("par", func(ctx *loom.Context, _ struct{}) ([]int, error) {
		return loom.Parallel(ctx,
			func(c *loom.Context) (int, error) {
				if _, err := c.Suspend("human"); err != nil {
					return 0, err
				}
				return 1, nil
			},
			func(c *loom.Context) (int, error) {
				out, err := c.Run("diag-a", func(context.Context) (any, error) {
					runs.Add(1)
					<-release // still running when its sibling parks
					return 2, nil
				})
				if err != nil {
					return 0, err
				}
				// The sibling parked: this next syscall must stop the branch.
				if _, err := c.Run("diag-b", func(context.Context) (any, error) { runs.Add(100); return 3, nil }); err != nil {
					return 0, err
				}
				return int(out[0] - '0'), nil
			},
		)
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "par", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	close(release)
	// The drive ends only once every branch has stopped.
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	resume(t, h, id, "human", `"ok"`)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "[1,2]" {
		t.Fatalf("output %s", res.Output)
	}
	if runs.Load() != 101 {
		t.Fatalf("runs = %d: diag-a must run once, diag-b once after the resume", runs.Load())
	}
}

func TestParallelFailureStopsSiblingsAndIsCatchable(t *testing.T) {
	boom := errors.New("boom")
	var late atomic.Int64
	started := make(chan struct{})
	flow := loom.NewFlow("parfail", func(ctx *loom.Context, _ struct{}) (string, error) {
		err := ctx.Parallel(
			func(c *loom.Context) error {
				<-started
				_, err := c.Run("fails", func(context.Context) (any, error) { return nil, boom })
				return err
			},
			func(c *loom.Context) error {
				// Running when its sibling fails: the scope's cancellation
				// reaches it, and its next syscall stops the branch.
				_, err := c.Run("blocked", func(ctx context.Context) (any, error) {
					close(started)
					<-ctx.Done()
					return nil, ctx.Err()
				})
				if _, err := c.Run("after", func(context.Context) (any, error) { late.Add(1); return 1, nil }); err != nil {
					return err
				}
				return err
			},
		)
		if !errors.Is(err, boom) {
			return "", fmt.Errorf("parallel returned %v", err)
		}
		return "caught", nil
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "parfail", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"caught"` || late.Load() != 0 {
		t.Fatalf("output %s, sibling steps after the failure: %d", res.Output, late.Load())
	}
	if res.State.Status != fold.StatusCompleted || res.State.Frames["fails"].Status != fold.FrameFailed ||
		res.State.Frames["blocked"].Status != fold.FrameFailed {
		t.Fatalf("state %+v", res.State.Frames)
	}
}

func TestEmitAppendsOncePerExecution(t *testing.T) {
	flow := loom.NewFlow("emit", func(ctx *loom.Context, _ struct{}) (int, error) {
		if err := ctx.Emit("order.placed", map[string]any{"id": 7}); err != nil {
			return 0, err
		}
		if _, err := ctx.Suspend("a"); err != nil {
			return 0, err
		}
		if err := ctx.Emit("order.approved", map[string]any{"id": 7}); err != nil {
			return 0, err
		}
		if _, err := ctx.Suspend("b"); err != nil {
			return 0, err
		}
		return 1, nil
	})
	h := newHarnessWith(t, replaying, flow)
	id, err := h.rt.Start(h.ctx(), "emit", nil)
	if err != nil {
		t.Fatal(err)
	}
	resume(t, h, id, "a", `1`)
	resume(t, h, id, "b", `2`)
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range h.log(id) {
		count[e.Type]++
		if e.Type == "order.placed" || e.Type == "order.approved" {
			if _, stamped := e.FlowEmit(); !stamped {
				t.Errorf("%s at %d is not stamped", e.Type, e.Sequence)
			}
		}
	}
	if count["order.placed"] != 1 || count["order.approved"] != 1 {
		t.Fatalf("emits in the log: %v", count)
	}
}

func TestUserspaceEmitOfKernelTypesRefusedWithNothingAppended(t *testing.T) {
	// Each case: the event type, the payload, and what is wrong with it.
	refusals := []struct {
		typ, why string
		payload  any
	}{
		{event.StepCompleted, "a kernel type", map[string]any{"stepId": "x", "output": 1}},
		{event.ExecutionFailed, "a kernel type", map[string]any{"error": "forged"}},
		{event.ApprovalGranted, "a kernel type", map[string]any{"principal": "me"}},
		{event.ResourceMetered, "a negative amount", map[string]any{"tokens": -1}},
		{event.ResourceMetered, "an amount over the ceiling", map[string]any{"costUsd": 1e300}},
		{event.ResourceMetered, "an amount that is not a number", map[string]any{"ms": "ten"}},
		{event.ResourceMetered, "a negative custom amount", map[string]any{"custom": map[string]any{"gpu": -2}}},
		{event.QuotaExceeded, "an over-long reason", map[string]any{"reason": string(make([]byte, 600))}},
		{event.QuotaExceeded, "a reason that is not a string", map[string]any{"reason": 42}},
		{event.QuotaExceeded, "a payload that is not an object", []int{1}},
		{event.DecisionRecorded, "a reserved decision id", map[string]any{"decisionId": "__loom_verdict:x#1", "choice": "done"}},
		{"__loom_fork__", "a reserved type", map[string]any{}},
	}
	for _, c := range refusals {
		t.Run(c.typ+" with "+c.why, func(t *testing.T) {
			var got error
			flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
				got = ctx.Emit(c.typ, c.payload)
				return 0, nil
			})
			h := newHarness(t, flow)
			id, err := h.rt.Start(h.ctx(), "f", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(got, loom.ErrEmitRefused) {
				t.Fatalf("emit = %v", got)
			}
			for _, e := range h.log(id) {
				if e.Type == c.typ {
					t.Fatalf("refused %s was appended", c.typ)
				}
			}
		})
	}
}
