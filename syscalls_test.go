package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func resume(t *testing.T, h *harness, id, gate, payload string) {
	t.Helper()
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: gate, Payload: json.RawMessage(payload)}); err != nil {
		t.Fatal(err)
	}
}

func TestReplayServesEverySyscallFromTheLog(t *testing.T) {
	var steps, decides atomic.Int64
	var times []int64
	h := &harness{t: t}
	flow := loom.NewFlow("replay", func(ctx *loom.Context, _ struct{}) (string, error) {
		for i := range 3 {
			if _, err := ctx.Run(fmt.Sprintf("fetch#%d", i), func(context.Context) (any, error) {
				steps.Add(1)
				return i, nil
			}); err != nil {
				return "", err
			}
		}
		choice, err := loom.Decide(ctx, "route", func() (string, error) { decides.Add(1); return "fast", nil })
		if err != nil {
			return "", err
		}
		times = append(times, loom.Now(ctx).UnixMilli())
		r := loom.Random(ctx).Uint64()
		if _, err := ctx.Suspend("go"); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s-%d", choice, r%1000), nil
	})
	h = newHarnessWith(t, replaying, flow)
	id, err := h.rt.Start(h.ctx(), "replay", nil)
	if err != nil {
		t.Fatal(err)
	}
	resume(t, h, id, "go", `null`)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if steps.Load() != 3 || decides.Load() != 1 {
		t.Fatalf("steps ran %d times, decider %d times", steps.Load(), decides.Load())
	}
	if len(times) != 2 || times[0] != times[1] {
		t.Fatalf("loom.Now was not replayed: %v", times)
	}
	if res.Status != fold.StatusCompleted {
		t.Fatalf("status %s", res.Status)
	}
}

func TestTypedFailureIsReplayedWithoutReinvocation(t *testing.T) {
	var calls atomic.Int64
	parse := loom.NewStep("parse", func(ctx context.Context, in string) (string, error) {
		calls.Add(1)
		return "", loom.Fail("schemaDrift", map[string]any{"field": in})
	}, loom.ErrorChannel("schemaDrift", `{"type":"object","required":["field"]}`))
	flow := loom.NewFlow("typed", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := loom.Run(ctx, parse, "price")
		var tf *loom.TypedFailure
		if !errors.As(err, &tf) {
			return "", fmt.Errorf("want a typed failure, got %v", err)
		}
		if _, err := ctx.Suspend("repaired"); err != nil {
			return "", err
		}
		return tf.Channel + ":" + string(tf.Payload), nil
	})
	h := newHarnessWith(t, replaying, flow)
	id, err := h.rt.Start(h.ctx(), "typed", nil)
	if err != nil {
		t.Fatal(err)
	}
	resume(t, h, id, "repaired", `1`)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"schemaDrift:{\"field\":\"price\"}"` || calls.Load() != 1 {
		t.Fatalf("output %s, calls %d", res.Output, calls.Load())
	}
	var failed event.Envelope
	for _, e := range h.log(id) {
		if e.Type == event.StepFailed {
			failed = e
		}
	}
	if !json.Valid(failed.Payload) || !strings.Contains(string(failed.Payload), `"channel":"schemaDrift"`) {
		t.Fatalf("STEP_FAILED = %s", failed.Payload)
	}
}

func TestTypedFailureDegradesLoudlyToUntyped(t *testing.T) {
	cases := map[string]error{
		"undeclared channel": loom.Fail("other", map[string]any{"field": "x"}),
		"invalid payload":    loom.Fail("schemaDrift", map[string]any{"nofield": 1}),
		"over the cap":       loom.Fail("schemaDrift", map[string]any{"field": string(make([]byte, loom.MaxTypedFailureBytes))}),
	}
	for name, failure := range cases {
		t.Run(name, func(t *testing.T) {
			step := loom.NewStep("parse", func(ctx context.Context, _ struct{}) (int, error) { return 0, failure },
				loom.ErrorChannel("schemaDrift", `{"type":"object","required":["field"]}`))
			flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (string, error) {
				_, err := loom.Run(ctx, step, struct{}{})
				var se *loom.StepError
				if !errors.As(err, &se) {
					return "", fmt.Errorf("want an untyped step error, got %v", err)
				}
				return "degraded", nil
			})
			h := newHarness(t, flow)
			id, err := h.rt.Start(h.ctx(), "f", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
				t.Fatal(err)
			}
			st, _ := h.rt.LoadState(h.ctx(), id)
			fr := st.Frames["parse"]
			if fr.ErrorChannel != "" || !strings.Contains(string(fr.Error), "degraded") {
				t.Fatalf("frame = %+v", fr)
			}
		})
	}
}
