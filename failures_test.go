package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
)

// noWait is a retry policy that never waits on the wall clock.
func noWait(attempts int) middleware.RetryPolicy {
	return middleware.RetryPolicy{MaxAttempts: attempts, Backoff: func(int64) time.Duration { return 0 },
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
}

func TestAPanickingStepIsAStepFailureWithItsStack(t *testing.T) {
	var flowSaw error
	boom := loom.NewStep("boom", func(context.Context, struct{}) (int, error) { panic("kaput") })
	flow := loom.NewFlow("panics", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, flowSaw = loom.Run(ctx, boom, struct{}{})
		return "handled", nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "panics", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"handled"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	var pe *loom.PanicError
	var se *loom.StepError
	if !errors.As(flowSaw, &se) || !errors.As(flowSaw, &pe) || pe.Value != "kaput" {
		t.Fatalf("the flow saw %v", flowSaw)
	}
	if fr := res.State.Frames["boom"]; fr.Status != fold.FrameFailed {
		t.Fatalf("frame %s, want failed", fr.Status)
	}
	var failed struct {
		Error struct {
			Message string `json:"message"`
			Stack   string `json:"stack"`
		} `json:"error"`
	}
	for _, e := range h.log(id) {
		if e.Type == event.StepFailed {
			if err := json.Unmarshal(e.Payload, &failed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if failed.Error.Message != "panic: kaput" || !strings.Contains(failed.Error.Stack, "goroutine") || len(failed.Error.Stack) > loom.MaxPanicStackBytes+64 {
		t.Fatalf("STEP_FAILED error %+v", failed.Error)
	}
}

func TestARetryPolicyRetriesAPanicAndAFailure(t *testing.T) {
	var calls atomic.Int64
	flaky := loom.NewStep("flaky", func(context.Context, struct{}) (int, error) {
		switch calls.Add(1) {
		case 1:
			panic("first attempt")
		case 2:
			return 0, errors.New("second attempt")
		}
		return 3, nil
	}, loom.WithRetry(noWait(3)))
	flow := loom.NewFlow("retries", func(ctx *loom.Context, _ struct{}) (int, error) { return loom.Run(ctx, flaky, struct{}{}) })
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "retries", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "3" || calls.Load() != 3 {
		t.Fatalf("%s %v after %d calls", res.Output, err, calls.Load())
	}
	if n := countType(h.log(id), event.StepRetrying); n != 2 {
		t.Fatalf("%d STEP_RETRYING, want 2", n)
	}
	if fr := res.State.Frames["flaky"]; fr.Status != fold.FrameCompleted || fr.Attempt != 3 {
		t.Fatalf("frame %+v", fr)
	}
}

func TestConfigDefaultRetryAppliesToStepsWithoutAPolicy(t *testing.T) {
	var calls atomic.Int64
	flow := loom.NewFlow("default", func(ctx *loom.Context, _ struct{}) (int, error) {
		out, err := ctx.Run("once-flaky", func(context.Context) (any, error) {
			if calls.Add(1) == 1 {
				return nil, errors.New("transient")
			}
			return 1, nil
		})
		if err != nil {
			return 0, err
		}
		return int(out[0] - '0'), nil
	})
	policy := noWait(2)
	h := newHarnessWith(t, loom.Config{DefaultRetry: &policy}, flow)
	id, _ := h.rt.Start(h.ctx(), "default", nil)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "1" || calls.Load() != 2 {
		t.Fatalf("%s %v after %d calls", res.Output, err, calls.Load())
	}
}

func TestAStepTimeoutBoundsEachAttempt(t *testing.T) {
	var attempts atomic.Int64
	slow := loom.NewStep("slow", func(ctx context.Context, _ struct{}) (int, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done() // the first attempt hangs until its own deadline
			return 0, ctx.Err()
		}
		return 2, nil
	}, loom.StepTimeout(20*time.Millisecond), loom.WithRetry(middleware.RetryPolicy{MaxAttempts: 2,
		Backoff: func(int64) time.Duration { return 0 }, Retryable: func(error) bool { return true }}))
	flow := loom.NewFlow("bounded", func(ctx *loom.Context, _ struct{}) (int, error) { return loom.Run(ctx, slow, struct{}{}) })
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "bounded", nil)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "2" || attempts.Load() != 2 {
		t.Fatalf("%s %v after %d attempts", res.Output, err, attempts.Load())
	}
}
