package loom_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// K9.4: when another process takes an execution over, the driver it took
// over from is refused: its appends fail with *store.FencedError and write
// nothing.
func TestK9_AStaleDriverIsFencedOut(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	var runs atomic.Int64
	flow := loom.NewFlow("slow", func(ctx *loom.Context, _ struct{}) (int, error) {
		out, err := ctx.Run("work", func(c context.Context) (any, error) {
			n := runs.Add(1)
			entered <- struct{}{}
			if n == 1 {
				<-release // the first driver is stuck here while another takes over
			}
			return n, nil
		})
		if err != nil {
			return 0, err
		}
		return int(out[0] - '0'), nil
	})
	h := newHarness(t, flow)
	id, err := h.rt.Start(h.ctx(), "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	// A second process believes the first is gone and re-drives.
	other := h.open(flow)
	if n, err := other.Recover(h.ctx()); err != nil || n != 1 {
		t.Fatalf("recovered %d: %v", n, err)
	}
	res, err := other.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != "2" {
		t.Fatalf("%s %v", res.Output, err)
	}
	before := len(h.log(id))
	close(release) // the zombie's effect returns; its STEP_COMPLETED must be refused
	h.rt.Close()
	log := h.log(id)
	if len(log) != before {
		t.Fatalf("the fenced driver wrote %d events", len(log)-before)
	}
	if st := fold.Fold(log); st.Status != fold.StatusCompleted || st.Sequence != int64(len(log)-1) {
		t.Fatalf("state %s at %d of %d events", st.Status, st.Sequence, len(log))
	}
	completed := 0
	for _, e := range log {
		if e.Type == event.StepCompleted {
			completed++
		}
	}
	if completed != 1 {
		t.Fatalf("STEP_COMPLETED %d times", completed)
	}
}

func TestK9_FencedAppendIsTyped(t *testing.T) {
	h := newHarness(t)
	f := h.events
	if _, err := f.AcquireFence(h.ctx(), "x"); err != nil {
		t.Fatal(err)
	}
	err := f.AppendFenced(h.ctx(), "x", 0, 0, []event.Envelope{{ID: "e", ExecutionID: "x", Type: "T"}})
	var fe *store.FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
}
