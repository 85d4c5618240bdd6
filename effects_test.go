package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
)

func mustRegistry(t *testing.T, effects map[string]effect.Func) *effect.Registry {
	t.Helper()
	r, err := effect.NewRegistry(effects)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEffectsResolveByToolID(t *testing.T) {
	reg := mustRegistry(t, map[string]effect.Func{
		"http.get": func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"status":200,"key":"` + ec.IdempotencyKey + `"}`), nil
		},
	})
	flow := loom.NewFlow("tool", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Execute(&loom.Task{ID: "fetch", Kind: "tool", ToolID: "http.get"}, map[string]string{"url": "x"})
	})
	h := newHarnessWith(t, loom.Config{Effects: reg}, flow)
	id, _ := h.rt.Start(h.ctx(), "tool", nil, loom.WithExecutionID("t1"))
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `{"status":200,"key":"t1/fetch/1"}` {
		t.Fatalf("%s %v", res.Output, err)
	}
	fr := res.State.Frames["fetch"]
	if fr.Kind != "tool" || fr.ToolID != "http.get" {
		t.Fatalf("frame %+v", fr)
	}
	unknown := loom.NewFlow("unknown", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Execute(&loom.Task{ID: "x", ToolID: "nope"}, nil)
	})
	h2 := newHarnessWith(t, loom.Config{Effects: reg}, unknown)
	id2, _ := h2.rt.Start(h2.ctx(), "unknown", nil)
	if _, err := h2.rt.WaitForCompletion(h2.ctx(), id2); err == nil || !errorsIsUnknownTool(h2, id2) {
		t.Fatalf("unknown tool: %v", err)
	}
}

func errorsIsUnknownTool(h *harness, id string) bool {
	st := fold.Fold(h.log(id))
	_, started := st.Frames["x"]
	return !started // refused before any STEP_STARTED
}

type denyTool string

func (d denyTool) Authorize(_ context.Context, req effect.Request) error {
	if req.ToolID == string(d) {
		return &effect.CapabilityDeniedError{ToolID: req.ToolID, StepID: req.StepID, Reason: "no grant", By: "test"}
	}
	return nil
}

func TestK2_ADeniedEffectNeverRunsAndIsRecorded(t *testing.T) {
	var ran atomic.Int64
	flow := loom.NewFlow("k2", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := ctx.Run("rm-rf", func(context.Context) (any, error) { ran.Add(1); return nil, nil })
		var denied *effect.CapabilityDeniedError
		if !errors.As(err, &denied) {
			return "", errors.New("want a capability denial")
		}
		_, err = ctx.Run("read", func(context.Context) (any, error) { ran.Add(10); return 1, nil })
		return "denied then allowed", err
	})
	h := newHarnessWith(t, loom.Config{EffectAuthorizer: denyTool("rm-rf")}, flow)
	id, _ := h.rt.Start(h.ctx(), "k2", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || ran.Load() != 10 {
		t.Fatalf("%s %v ran %d", res.Output, err, ran.Load())
	}
	v := res.State.Variables.Verdicts
	if len(v) != 1 || v[0].Type != event.EffectDenied || v[0].StepID != "rm-rf" {
		t.Fatalf("verdicts %+v", v)
	}
	if res.State.Frames["rm-rf"].Status != fold.FrameFailed {
		t.Fatalf("frame %+v", res.State.Frames["rm-rf"])
	}
}

func TestEffectEmitIsValidatedAndItsDecisionsNamespaced(t *testing.T) {
	flow := loom.NewFlow("emitter", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := ctx.Run("model", func(c context.Context) (any, error) {
			ec := loom.EffectContext(c)
			if err := ec.Emit(event.ResourceMetered, map[string]any{"tokens": 12}); err != nil {
				return nil, err
			}
			if err := ec.Emit(event.DecisionRecorded, map[string]any{"decisionId": "route", "choice": "fast"}); err != nil {
				return nil, err
			}
			if err := ec.Emit(event.StepCompleted, map[string]any{"stepId": "forged"}); !errors.Is(err, loom.ErrEmitRefused) {
				return nil, errors.New("a forged STEP_COMPLETED was not refused")
			}
			if err := ec.Emit(event.DecisionRecorded, map[string]any{"decisionId": "__loom_verdict:x#1", "choice": "done"}); !errors.Is(err, loom.ErrEmitRefused) {
				return nil, errors.New("a reserved decision id was not refused")
			}
			return "ok", nil
		})
		if err != nil {
			return "", err
		}
		// The effect's decision cannot answer the flow's own Decide.
		return loom.Decide(ctx, "route", func() (string, error) { return "flow's own", nil })
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "emitter", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"flow's own"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	d := res.State.Variables.Decisions
	if _, ok := d["effect:model#1:route"]; !ok {
		t.Fatalf("decisions %v", d)
	}
	if r := res.State.Variables.Resources; r == nil || *r.Tokens != 12 {
		t.Fatalf("resources %+v", r)
	}
	for _, e := range h.log(id) {
		if _, stamped := e.FlowEmit(); stamped && (e.Type == event.ResourceMetered || e.Type == event.DecisionRecorded) {
			t.Fatalf("an effect's emit was stamped: %s", e.Type)
		}
	}
}

// K8 with retries: a step's timeout bounds each attempt, not all of them.
func TestK8_EachRetryAttemptGetsItsOwnDeadline(t *testing.T) {
	var attempts atomic.Int64
	slow := loom.NewStep("slow", func(c context.Context, _ struct{}) (string, error) {
		if attempts.Add(1) == 1 {
			<-c.Done() // the first attempt times out
			return "", errors.New("attempt timed out")
		}
		if c.Err() != nil {
			return "", errors.New("the second attempt started with an expired deadline")
		}
		return "second attempt in time", nil
	})
	slow.Task().Timeout = 20 * time.Millisecond
	flow := loom.NewFlow("retried", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Run(ctx, slow, struct{}{})
	})
	noWait := func(context.Context, time.Duration) error { return nil }
	retry := middleware.Retry(middleware.RetryPolicy{MaxAttempts: 2, Sleep: noWait,
		Retryable: func(error) bool { return true }})
	h := newHarnessWith(t, loom.Config{Middleware: []effect.Middleware{retry}}, flow)
	id, _ := h.rt.Start(h.ctx(), "retried", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"second attempt in time"` || attempts.Load() != 2 {
		t.Fatalf("%s %v after %d attempts", res.Output, err, attempts.Load())
	}
	if fr := res.State.Frames["slow"]; fr.Attempt != 2 {
		t.Fatalf("frame %+v", fr)
	}
}
