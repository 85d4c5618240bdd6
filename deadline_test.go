package loom_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
)

func TestK8_AnExecutionDeadlineCancelsItWhereverItIsParked(t *testing.T) {
	h, clock, _ := timed(t, loom.Config{}, gatedFlow())
	id, err := h.rt.Start(h.ctx(), "gated", nil, loom.WithDeadline(clock.Now().Add(30*time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	clock.advance(45 * time.Minute)
	if n, err := h.rt.FireDueTimers(h.ctx()); n != 1 || err != nil {
		t.Fatalf("fired %d: %v", n, err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || res.Status != fold.StatusCancelled {
		t.Fatalf("%s %v", res.Status, err)
	}
	// The gate's own timeout (1h) fires later and is refused: nothing moves.
	clock.advance(time.Hour)
	if _, err := h.rt.FireDueTimers(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.rt.LoadState(h.ctx(), id); st.Status != fold.StatusCancelled {
		t.Fatalf("status %s", st.Status)
	}
}

func TestK8_EffectsSeeTheExecutionDeadline(t *testing.T) {
	var sawDeadline bool
	flow := loom.NewFlow("late", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := ctx.Run("slow", func(c context.Context) (any, error) {
			_, sawDeadline = c.Deadline()
			<-c.Done()
			return nil, c.Err()
		})
		if errors.Is(err, context.DeadlineExceeded) {
			return "timed out", nil
		}
		return "", err
	})
	h, clock, _ := timed(t, loom.Config{}, flow)
	id, _ := h.rt.Start(h.ctx(), "late", nil, loom.WithDeadline(clock.Now().Add(20*time.Millisecond)))
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"timed out"` || !sawDeadline {
		t.Fatalf("%s %v deadline seen %v", res.Output, err, sawDeadline)
	}
}

func TestK8_StepTimeoutAndMaxEffectTimeBoundAnEffect(t *testing.T) {
	wait := func(c context.Context, _ struct{}) (int, error) { <-c.Done(); return 0, c.Err() }
	stepBound := loom.NewStep("bounded", wait)
	stepBound.Task().Timeout = 10 * time.Millisecond
	free := loom.NewStep("free", wait)
	flow := loom.NewFlow("bounds", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err1 := loom.Run(ctx, stepBound, struct{}{})
		_, err2 := loom.Run(ctx, free, struct{}{})
		if !errors.Is(err1, context.DeadlineExceeded) || !errors.Is(err2, context.DeadlineExceeded) {
			return 0, errors.Join(err1, err2)
		}
		return 2, nil
	})
	h := newHarnessWith(t, loom.Config{MaxEffectTime: 30 * time.Millisecond}, flow)
	id, _ := h.rt.Start(h.ctx(), "bounds", nil)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != "2" {
		t.Fatalf("%s %v", res.Output, err)
	}
}
