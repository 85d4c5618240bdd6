package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

type refundAnswer struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// refundFlow asks a person to approve a refund (the human step
// "approve-refund"), then parks on the plain gate "ship", and returns both
// answers.
func refundFlow() *loom.Flow {
	return loom.NewFlow("refund", func(ctx *loom.Context, amount int) (string, error) {
		a, err := loom.Ask[refundAnswer](ctx, "approve-refund")
		if err != nil {
			return "", err
		}
		carrier, err := loom.Suspend[string](ctx, "ship")
		if err != nil {
			return "", err
		}
		return a.By + ":" + carrier, nil
	}, loom.WithResumeSchema("approve-refund", `{"type":"object","required":["approved","by"]}`))
}

func humanRuntime(t *testing.T, events store.EventStore, sticky int) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{refundFlow()}, StickyParks: sticky,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func suspendPayloadAt(t *testing.T, log []event.Envelope, gate string) map[string]json.RawMessage {
	t.Helper()
	for _, e := range log {
		var p map[string]json.RawMessage
		if e.Type == event.ExecutionSuspended && json.Unmarshal(e.Payload, &p) == nil && string(p["on"]) == `"`+gate+`"` {
			return p
		}
	}
	t.Fatalf("no park on %s in the log", gate)
	return nil
}

// §5-r: a human step's park records its stepId — the kernel sets it, and
// a plain gate's park has none (Suspend takes no step id to give). The
// answer is the step's recorded output, consumed in order with the gates:
// the gate after the step gets its own answer, live (a sticky park) and
// on a re-drive from the log past the completed step (no sticky parks).
func TestSpec5_AHumanStepsParkRecordsItsStepIDAndConsumesItsAnswerInOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		sticky int
	}{{"sticky parks", 0}, {"re-driven from the log", -1}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			events := memstore.NewEventStore()
			rt := humanRuntime(t, events, c.sticky)
			id, err := rt.Start(ctx, "refund", 40)
			if err != nil {
				t.Fatal(err)
			}
			st, err := rt.WaitForSuspend(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if on := st.Variables.SuspendedOn; on.On != "approve-refund" || on.StepID != "approve-refund" || on.Attempt != nil {
				t.Fatalf("the human step's park: %+v", on)
			}
			if fr := st.Frames["approve-refund"]; fr.Kind != "human" || fr.Status != fold.FrameRunning {
				t.Fatalf("the human step's frame: %+v", fr)
			}
			answer := json.RawMessage(`{"approved":true,"by":"ann"}`)
			if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve-refund", Payload: answer}); err != nil {
				t.Fatal(err)
			}
			st, err = rt.WaitForSuspend(ctx, id)
			if err != nil || st.Variables.SuspendedOn.On != "ship" {
				t.Fatalf("after the answer: %+v %v (the answer must not open the next gate)", st.Variables.SuspendedOn, err)
			}
			if fr := st.Frames["approve-refund"]; fr.Status != fold.FrameCompleted || string(fr.Output) != string(answer) {
				t.Fatalf("the human step's outcome: %+v", fr)
			}
			log := logOf(t, events, id)
			if _, has := suspendPayloadAt(t, log, "ship")["stepId"]; has {
				t.Fatal("a plain gate's park records a stepId")
			}
			if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "ship", Payload: json.RawMessage(`"dhl"`)}); err != nil {
				t.Fatal(err)
			}
			res, err := rt.WaitForCompletion(ctx, id)
			if err != nil || string(res.Output) != `"ann:dhl"` {
				t.Fatalf("completed with %s, %v; want each answer at its own suspend point", res.Output, err)
			}

			// A new process over the log replays it past the completed
			// step, consuming its entry before the gate's.
			fresh := humanRuntime(t, events, -1)
			if rep := fresh.CheckReplay(ctx, logOf(t, events, id)); !rep.Compatible() {
				t.Fatalf("the log does not replay: %s", rep)
			}
			if rep := fresh.CheckReplay(ctx, log); !rep.Compatible() {
				t.Fatalf("the log at the ship park does not replay: %s", rep)
			}
		})
	}
}

// An answer the step's schema refuses, a reused human step id and a
// reserved name are refused, with nothing appended.
func TestHumanStepRefusals(t *testing.T) {
	ctx := context.Background()
	events := memstore.NewEventStore()
	rt := humanRuntime(t, events, -1)
	id, err := rt.Start(ctx, "refund", 40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	before := logOf(t, events, id)
	var invalid *loom.ResumePayloadValidationError
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve-refund", Payload: json.RawMessage(`{"approved":true}`)}); !errors.As(err, &invalid) {
		t.Fatalf("an answer without by: %v", err)
	}
	assertSameEvents(t, "after a refused answer", logOf(t, events, id), before)

	errs := map[string]error{}
	reuse := loom.NewFlow("reuse", func(ctx *loom.Context, _ struct{}) (string, error) {
		if _, err := ctx.Ask("once"); err != nil {
			return "", err
		}
		_, err := ctx.Ask("once")
		var reused *loom.HumanStepReusedError
		if !errors.As(err, &reused) || reused.ID != "once" {
			return "", errors.New("a second ask of one id was not refused: " + errString(err))
		}
		_, errs["reserved"] = ctx.Ask("__loom_x")
		_, errs["kernel type"] = ctx.Ask(event.StepStarted)
		return "refused", nil
	})
	rt2, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{reuse}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	rid, err := rt2.Start(ctx, "reuse", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt2.WaitForSuspend(ctx, rid); err != nil {
		t.Fatal(err)
	}
	if err := rt2.Resume(ctx, rid, loom.ResumeEvent{EventType: "once", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt2.WaitForCompletion(ctx, rid)
	if err != nil || string(res.Output) != `"refused"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	for what, err := range errs { //loom:order-independent each checked alone
		if err == nil || !strings.Contains(err.Error(), "gate") {
			t.Errorf("%s: %v, want a refusal of the name", what, err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
