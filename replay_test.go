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
)

// countingEvents counts the events a store hands out.
type countingEvents struct {
	store.EventStore
	read atomic.Int64
}

func (c *countingEvents) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	evs, err := c.EventStore.ReadFrom(ctx, id, from)
	c.read.Add(int64(len(evs)))
	return evs, err
}

func TestResumeFoldsOnlyTheTailAfterTheLatestSnapshot(t *testing.T) {
	flow := loom.NewFlow("loop", func(ctx *loom.Context, _ struct{}) (int, error) {
		for i := range 300 {
			if _, err := ctx.Run(fmt.Sprintf("s#%d", i), func(context.Context) (any, error) { return i, nil }); err != nil {
				return 0, err
			}
		}
		if _, err := ctx.Suspend("go"); err != nil {
			return 0, err
		}
		return 1, nil
	})
	h := newHarness(t, flow)
	counting := &countingEvents{EventStore: h.events}
	rt, err := loom.New(loom.Config{Events: counting, Snapshots: h.snaps, Flows: []*loom.Flow{flow}, SnapshotEvery: 100, StickyParks: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := h.ctx()
	id, _ := rt.Start(ctx, "loop", nil)
	st, err := rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	counting.read.Store(0)
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	// Resume waited for the parking drive to end, which wrote the park's
	// snapshot. How many periodic checkpoints were written beside it is
	// the journal's business (a pending one is replaced by a newer one), so
	// the test asserts only where they are, and that the resume read
	// nothing older than the latest.
	seqs, _ := h.snaps.ListSequences(ctx, id)
	if len(seqs) == 0 || seqs[len(seqs)-1] != st.Sequence {
		t.Fatalf("snapshots at %v, want the last at the suspend (%d)", seqs, st.Sequence)
	}
	for _, s := range seqs[:len(seqs)-1] {
		if (s+1)%100 != 0 {
			t.Fatalf("periodic snapshot at %d, want only after every 100th event: %v", s, seqs)
		}
	}
	// The gate transaction loads twice (before and under the claim); each
	// load reads only the snapshot's own event, never the 600-event prefix.
	if n := counting.read.Load(); n > 4 {
		t.Fatalf("resume read %d events, want only the tail", n)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestDivergenceFailModeParksOnTheReservedGate(t *testing.T) {
	var second atomic.Bool
	flow := loom.NewFlow("drift", func(ctx *loom.Context, _ struct{}) (int, error) {
		first := "a"
		if second.Load() {
			first = "b" // the code changed between runs
		}
		if _, err := ctx.Run(first, func(context.Context) (any, error) { return 1, nil }); err != nil {
			return 0, err
		}
		if _, err := ctx.Suspend("go"); err != nil {
			return 0, err
		}
		return 1, nil
	})
	h := newHarnessWith(t, loom.Config{StickyParks: -1, Divergence: loom.DivergenceFail}, flow)
	id, _ := h.rt.Start(h.ctx(), "drift", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	second.Store(true)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Variables.SuspendedOn.On != fold.GateDiverged {
		t.Fatalf("parked on %+v", st.Variables.SuspendedOn)
	}
	if _, ran := st.Frames["b"]; ran {
		t.Fatal("the diverging step ran")
	}
	// The operator fixes the code and resumes the reserved gate: status only.
	second.Store(false)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: fold.GateDiverged}); err != nil {
		t.Fatal(err)
	}
	// "go" was answered before the divergence: the fixed code goes on past it.
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("%s %v", res.Status, err)
	}
	if _, ran := res.State.Frames["b"]; ran {
		t.Fatal("the diverging step ran")
	}
}

// flakyStore fails every append once armed: a stand-in for a crash.
type flakyStore struct {
	store.EventStore
	armed atomic.Bool
}

var errCrash = errors.New("crash")

func (f *flakyStore) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if f.armed.Load() {
		return errCrash
	}
	return f.EventStore.Append(ctx, id, expected, evs)
}

func TestNonIdempotentStepInDoubtAfterACrashParksForAVerdict(t *testing.T) {
	var charges atomic.Int64
	var crash *flakyStore
	charge := loom.NewStep("charge", func(ctx context.Context, amount int) (string, error) {
		charges.Add(1)
		crash.armed.Store(true) // the process dies before the outcome is durable
		return "ch_1", nil
	}, loom.NonIdempotent())
	flow := loom.NewFlow("pay", func(ctx *loom.Context, amount int) (string, error) {
		return loom.Run(ctx, charge, amount)
	})
	h := newHarness(t, flow)
	crash = &flakyStore{EventStore: h.events}
	first, _ := loom.New(loom.Config{Events: crash, Flows: []*loom.Flow{flow}})
	id, err := first.Start(h.ctx(), "pay", 5)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, h, id, func(s fold.State) bool { return s.Frames["charge"].Status == fold.FrameRunning })
	first.Close()
	crash.armed.Store(false)
	if n, err := h.rt.Recover(h.ctx()); err != nil || n != 1 {
		t.Fatalf("recovered %d: %v", n, err)
	}
	st, err := h.rt.WaitForSuspend(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Variables.SuspendedOn.On != fold.GateInDoubt || charges.Load() != 1 {
		t.Fatalf("parked on %+v after %d charges", st.Variables.SuspendedOn, charges.Load())
	}
	before := len(h.log(id))
	var ve *loom.ResumePayloadValidationError
	err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: fold.GateInDoubt})
	if err == nil {
		t.Fatal("a plain resume of the in-doubt park was accepted")
	}
	if err := h.rt.ResolveInDoubt(h.ctx(), id, loom.Verdict{StepID: "charge", Attempt: 2}); !errors.As(err, &ve) {
		t.Fatalf("verdict for another attempt: %v", err)
	}
	if len(h.log(id)) != before {
		t.Fatal("a refused verdict appended")
	}
	if err := h.rt.ResolveInDoubt(h.ctx(), id, loom.Verdict{StepID: "charge", Attempt: 1, Done: true, Output: json.RawMessage(`"ch_1"`)}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"ch_1"` || charges.Load() != 1 {
		t.Fatalf("%s %v after %d charges", res.Output, err, charges.Load())
	}
}

func (c *countingEvents) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return c.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}
