package loom_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
)

// emits returns the emits of typ in the log and whether each is stamped.
func emits(h *harness, id, typ string) []bool {
	var out []bool
	for _, e := range h.log(id) {
		if e.Type == typ {
			_, stamped := e.FlowEmit()
			out = append(out, stamped)
		}
	}
	return out
}

// ADR 0102: an emit after a step outcome replay does not serve (an untyped
// failure) is appended unstamped, and the re-run — whose step then runs live
// — appends it again.
func TestSpec3_EmitAfterAnUnservedOutcomeIsUnstampedAndReappended(t *testing.T) {
	var attempt atomic.Int64
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
		_, err := ctx.Run("flaky", func(context.Context) (any, error) {
			if attempt.Add(1) == 1 {
				return nil, errors.New("transient")
			}
			return 1, nil
		})
		_ = err // the flow tolerates the failure
		if err := ctx.Emit("note", map[string]any{"k": 1}); err != nil {
			return 0, err
		}
		_, err = ctx.Suspend("go")
		return 0, err
	})
	h := newHarnessWith(t, replaying, flow)
	id, _ := h.rt.Start(h.ctx(), "f", nil)
	resume(t, h, id, "go", "1")
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if got := emits(h, id, "note"); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("emits (stamped?) = %v, want [false true]", got)
	}
}

// ADR 0102: an emit while the run's own effect is executing is unstamped.
func TestSpec3_EmitWhileAnEffectRunsIsUnstamped(t *testing.T) {
	inside := make(chan struct{})
	done := make(chan struct{})
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
		err := ctx.Parallel(
			func(c *loom.Context) error {
				_, err := c.Run("slow", func(context.Context) (any, error) {
					close(inside)
					<-done
					return 1, nil
				})
				return err
			},
			func(c *loom.Context) error {
				<-inside
				defer close(done)
				return c.Emit("while", map[string]any{})
			},
		)
		if err != nil {
			return 0, err
		}
		return 1, ctx.Emit("after", map[string]any{})
	})
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "f", nil)
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if got := emits(h, id, "while"); len(got) != 1 || got[0] {
		t.Fatalf("emit during an effect: %v, want one unstamped", got)
	}
	if got := emits(h, id, "after"); len(got) != 1 || !got[0] {
		t.Fatalf("emit after the effect: %v, want one stamped", got)
	}
}

// A repeated emit of the same content is appended each time in a first run
// (n-th emit of a digest beyond the logged count), and served on replay.
func TestSpec3_RepeatedContentCountsPerDigest(t *testing.T) {
	flow := loom.NewFlow("f", func(ctx *loom.Context, _ struct{}) (int, error) {
		for range 3 {
			if err := ctx.Emit("tick", map[string]any{"same": true}); err != nil {
				return 0, err
			}
		}
		_, err := ctx.Suspend("go")
		return 0, err
	})
	h := newHarnessWith(t, replaying, flow)
	id, _ := h.rt.Start(h.ctx(), "f", nil)
	resume(t, h, id, "go", "1")
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	if got := emits(h, id, "tick"); len(got) != 3 || !got[0] || !got[1] || !got[2] {
		t.Fatalf("ticks = %v, want 3 stamped emits, appended once", got)
	}
}
