package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

func TestResumeAsOntoATerminalExecutionRecordsANullStatusOnlyResume(t *testing.T) {
	var runs atomic.Int64
	flow := loom.NewFlow("once", func(ctx *loom.Context, _ struct{}) (int, error) {
		runs.Add(1)
		return 7, nil
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "once", nil)
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	n := len(h.log(id))
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, id, func(s fold.State) bool { return s.Sequence > int64(n) && s.Status == fold.StatusCompleted })
	log := h.log(id)
	if log[n].Type != event.ExecutionResumed || string(log[n].Payload) != "" && string(log[n].Payload) != "null" {
		t.Fatalf("re-open event %s %s", log[n].Type, log[n].Payload)
	}
	st := fold.Fold(log)
	if len(st.Variables.ResumePayloads) != 0 || runs.Load() != 2 {
		t.Fatalf("passthroughs %v, runs %d", st.Variables.ResumePayloads, runs.Load())
	}
}

func TestResumeAsOntoAParkedExecutionEnforcesTheTargetFlowsGate(t *testing.T) {
	v1 := loom.NewFlow("v1", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Suspend("approve")
	})
	v2 := loom.NewFlow("v2", func(ctx *loom.Context, _ struct{}) (string, error) {
		a, err := loom.Suspend[struct{ Approved bool }](ctx, "approve")
		if err != nil {
			return "", err
		}
		if a.Approved {
			return "v2 approved", nil
		}
		return "v2 rejected", nil
	}, loom.WithResumeSchema("approve", `{"type":"object","required":["approved"]}`), loom.WithCodeFingerprint("v2"))
	h := newHarness(t, v1, v2)
	id, _ := h.rt.Start(h.ctx(), "v1", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	before := len(h.log(id))
	var ve *loom.ResumePayloadValidationError
	err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{}`)}, loom.OntoFlow("v2"))
	if !errors.As(err, &ve) || len(h.log(id)) != before {
		t.Fatalf("the target flow's schema was not enforced: %v", err)
	}
	var rr *loom.ResumeRefusedError
	err = h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "other", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"))
	if !errors.As(err, &rr) || rr.Reason != loom.RefusedGateMismatch {
		t.Fatalf("gate rule: %v", err)
	}
	failing := loom.MigrateInput(func(json.RawMessage) (json.RawMessage, error) { return nil, errors.New("no") })
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"), failing); err == nil || len(h.log(id)) != before {
		t.Fatalf("a failing migration appended or passed: %v", err)
	}
	migrate := loom.MigrateInput(func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"v":2}`), nil })
	if err := h.rt.ResumeAs(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}, loom.OntoFlow("v2"), migrate); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"v2 approved"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	if v := res.State.Variables; v.CodeHash != "v2" || string(v.Input) != `{"v":2}` {
		t.Fatalf("migration not folded: codeHash %q input %s", v.CodeHash, v.Input)
	}
	if log := h.log(id); log[before].Type != event.ExecutionMigrated {
		t.Fatalf("first event after the park: %s", log[before].Type)
	}
}

func TestRecoverRedrivesACrashedExecutionWithoutAResume(t *testing.T) {
	var steps atomic.Int64
	hold := make(chan struct{})
	flow := loom.NewFlow("crashy", func(ctx *loom.Context, _ struct{}) (int, error) {
		if _, err := ctx.Run("first", func(context.Context) (any, error) { steps.Add(1); return 1, nil }); err != nil {
			return 0, err
		}
		if _, err := ctx.Run("second", func(c context.Context) (any, error) {
			steps.Add(10)
			select {
			case <-hold:
			case <-c.Done(): // the "process" dies here
				return nil, c.Err()
			}
			return 2, nil
		}); err != nil {
			return 0, err
		}
		return 3, nil
	})
	h := newHarnessWith(t, loom.Config{Durability: loom.StepDurable}, flow)
	id, _ := h.rt.Start(h.ctx(), "crashy", nil)
	waitUntil(t, h, id, func(s fold.State) bool { return s.Frames["second"].Status == fold.FrameRunning })
	h.rt.Close() // a Close mid-step leaves the execution running in the log
	close(hold)
	rt := h.open(flow)
	n, err := rt.Recover(h.ctx())
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	res, err := rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "3" {
		t.Fatalf("%s %v", res.Output, err)
	}
	if steps.Load() != 21 {
		t.Fatalf("steps = %d: first must run once, second twice", steps.Load())
	}
	count := map[string]int{}
	for _, e := range h.log(id) {
		count[e.Type]++
	}
	if count[event.ExecutionRecovered] != 1 || count[event.ExecutionResumed] != 0 {
		t.Fatalf("events %v", count)
	}
	if n, _ := rt.Recover(h.ctx()); n != 0 {
		t.Fatalf("a completed execution was recovered again: %d", n)
	}
}
