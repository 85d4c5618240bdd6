package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestCancelStopsARunningDriveAndCancelsItsEffects(t *testing.T) {
	entered := make(chan struct{})
	var after atomic.Int64
	flow := loom.NewFlow("long", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Run("wait", func(c context.Context) (any, error) {
			close(entered)
			<-c.Done() // the cancel reaches the running effect
			return nil, c.Err()
		})
		if _, err2 := ctx.Run("next", func(context.Context) (any, error) { after.Add(1); return 1, nil }); err2 != nil {
			return 0, err2
		}
		return 0, err
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "long", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	if err := h.rt.Cancel(h.ctx(), id, "operator"); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || res.Status != fold.StatusCancelled {
		t.Fatalf("%s %v", res.Status, err)
	}
	if after.Load() != 0 {
		t.Fatal("a step started after the cancel")
	}
	log := h.log(id)
	if log[len(log)-1].Type != event.ExecutionCancelled {
		t.Fatalf("events after the cancel: %v", types(log))
	}
	before := len(log)
	var rr *loom.ResumeRefusedError
	if err := h.rt.Cancel(h.ctx(), id, "again"); !errors.As(err, &rr) || rr.Reason != loom.RefusedTerminal {
		t.Fatalf("second cancel: %v", err)
	}
	if len(h.log(id)) != before {
		t.Fatal("a refused cancel appended")
	}
}

func TestCancelAParkedExecution(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	if err := h.rt.Cancel(h.ctx(), id, ""); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.rt.LoadState(h.ctx(), id); st.Status != fold.StatusCancelled {
		t.Fatalf("status %s", st.Status)
	}
}

func TestWaitForSuspendRejectsATerminalRun(t *testing.T) {
	flow := loom.NewFlow("quick", func(ctx *loom.Context, _ struct{}) (int, error) { return 1, nil })
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "quick", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.rt.WaitForSuspend(h.ctx(), id)
	var te *loom.ExecutionTerminatedError
	if !errors.As(err, &te) || te.Status != fold.StatusCompleted {
		t.Fatalf("err = %v", err)
	}
}

func TestFailedFlowIsRecordedAndReported(t *testing.T) {
	flow := loom.NewFlow("bad", func(ctx *loom.Context, _ struct{}) (int, error) { return 0, errors.New("no stock") })
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "bad", nil)
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	var fe *loom.FlowFailedError
	if !errors.As(err, &fe) || fe.Message != "no stock" || res.Status != fold.StatusFailed {
		t.Fatalf("%v %v", res.Status, err)
	}
}

func TestForkAtAGateSimulatesWithoutActingAndParentIsUntouched(t *testing.T) {
	var real, simulated atomic.Int64
	apply := loom.NewStep("apply-fix", func(ctx context.Context, fix string) (string, error) {
		real.Add(1)
		return "applied " + fix, nil
	}, loom.Simulation(func(ctx context.Context, fix string) (string, error) {
		simulated.Add(1)
		return "would apply " + fix, nil
	}))
	flow := loom.NewFlow("remediate", func(ctx *loom.Context, _ struct{}) (string, error) {
		fix, err := loom.Suspend[string](ctx, "choose")
		if err != nil {
			return "", err
		}
		return loom.Run(ctx, apply, fix)
	})
	h := newHarnessWith(t, loom.Config{}, flow)
	id, _ := h.rt.Start(h.ctx(), "remediate", nil)
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	parentLog := len(h.log(id))
	forkID, err := h.rt.Fork(h.ctx(), id, st.Sequence, loom.ForkID("branch-a"), loom.SimulateFork())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Resume(h.ctx(), forkID, loom.ResumeEvent{EventType: "choose", Payload: json.RawMessage(`"restart"`)}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), forkID)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `"would apply restart"` || real.Load() != 0 || simulated.Load() != 1 {
		t.Fatalf("fork output %s, real %d, simulated %d", res.Output, real.Load(), simulated.Load())
	}
	if chain := string(res.State.Variables.ForkChain); chain != `[{"executionId":"`+id+`","sequence":`+fmt.Sprint(st.Sequence)+`,"simulate":true}]` {
		t.Fatalf("_forkChain = %s", chain)
	}
	for _, e := range h.log(forkID)[st.Sequence+2:] {
		if string(e.Metadata["simulate"]) != "true" {
			t.Fatalf("simulated event %s is not marked", e.Type)
		}
	}
	if len(h.log(id)) != parentLog {
		t.Fatal("the fork changed its parent")
	}
	// The parent goes on for real.
	resume(t, h, id, "choose", `"rollback"`)
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || string(res.Output) != `"applied rollback"` {
		t.Fatalf("parent: %s %v", res.Output, err)
	}
}

func TestForkOfAnUnknownSequenceIsRefused(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	if _, err := h.rt.Fork(h.ctx(), id, 99); err == nil {
		t.Fatal("fork beyond the log was accepted")
	}
	if _, err := h.rt.Fork(h.ctx(), id, 0, loom.ForkID(id)); !errors.Is(err, loom.ErrExecutionExists) {
		t.Fatalf("fork onto an existing id: %v", err)
	}
}

func TestPromoteMovesARef(t *testing.T) {
	h := newHarness(t, gatedFlow())
	h.cfg.Branches = nil
	id := parked(t, h)
	if _, err := h.rt.Promote(h.ctx(), "main", id); err == nil {
		t.Fatal("promote without a registry")
	}
	reg := newBranchRegistry()
	cfg := loom.Config{Branches: reg}
	h2 := newHarnessWith(t, cfg, gatedFlow())
	a, b := parked(t, h2), parked(t, h2)
	if ref, err := h2.rt.Promote(h2.ctx(), "incident/main", a); err != nil || ref.Version != 1 {
		t.Fatalf("%+v %v", ref, err)
	}
	ref, err := h2.rt.Promote(h2.ctx(), "incident/main", b)
	if err != nil || ref.ExecutionID != b || ref.Version != 2 {
		t.Fatalf("%+v %v", ref, err)
	}
	_ = store.AnyVersion
}

func TestWaitForSettledReturnsOnParkOrEnd(t *testing.T) {
	h := newHarness(t, gatedFlow())
	id := parked(t, h)
	if st, err := h.rt.WaitForSettled(h.ctx(), id); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("%s %v", st.Status, err)
	}
	if err := h.rt.Cancel(h.ctx(), id, "done"); err != nil {
		t.Fatal(err)
	}
	if st, err := h.rt.WaitForSettled(h.ctx(), id); err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("%s %v", st.Status, err)
	}
}

func TestFlowOfNamesTheExecutionsFlow(t *testing.T) {
	flow := loom.NewFlow("named", func(ctx *loom.Context, _ struct{}) (string, error) { return "ok", nil })
	rt, err := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "named", nil)
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, err := rt.FlowOf(ctx, id); err != nil || got != "named" {
		t.Fatalf("FlowOf = %q, %v", got, err)
	}
	if _, err := rt.FlowOf(ctx, "missing"); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("FlowOf(missing) = %v, want ErrExecutionNotFound", err)
	}
}
