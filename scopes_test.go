package loom_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// mixed uses steps, a decision, a parallel block, an emit and a gate: the
// issue-3 kernel's whole surface.
func mixed() *loom.Flow {
	return loom.NewFlow("mixed", func(ctx *loom.Context, _ struct{}) (string, error) {
		aDone := make(chan struct{}) // orders the branches, so logs compare byte for byte
		out, err := loom.Parallel(ctx,
			func(c *loom.Context) (string, error) {
				defer close(aDone)
				raw, err := c.Run("a", func(context.Context) (any, error) { return "A", nil })
				return string(raw), err
			},
			func(c *loom.Context) (string, error) {
				<-aDone
				raw, err := c.Run("b", func(context.Context) (any, error) { return "B", nil })
				return string(raw), err
			})
		if err != nil {
			return "", err
		}
		pick, err := loom.Decide(ctx, "pick", func() (int, error) { return 1, nil })
		if err != nil {
			return "", err
		}
		if err := ctx.Emit("mixed.done", map[string]any{"n": pick}); err != nil {
			return "", err
		}
		answer, err := loom.Suspend[string](ctx, "go")
		return fmt.Sprint(out, pick, answer), err
	})
}

func runMixed(t *testing.T, cfg loom.Config) *harness {
	t.Helper()
	cfg.Clock = &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	cfg.StickyParks = -1
	h := newHarnessWith(t, cfg, mixed())
	id, _ := h.rt.Start(h.ctx(), "mixed", nil, loom.WithExecutionID("m"))
	resume(t, h, id, "go", `"yes"`)
	if _, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	return h
}

func encodedLog(t *testing.T, h *harness) []string {
	var out []string
	for _, e := range h.log("m") {
		e.ID = ""
		b, err := event.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// G2: a kernel.features flag that a flow does not use changes nothing: the
// log is byte-identical with the flag off and on.
func TestFeaturesUnusedAreByteIdentical(t *testing.T) {
	off := encodedLog(t, runMixed(t, loom.Config{}))
	on := encodedLog(t, runMixed(t, loom.Config{Features: loom.Features{Inbox: true, ContinueAsNew: true}}))
	if fmt.Sprint(off) != fmt.Sprint(on) {
		t.Fatalf("logs differ:\n off %v\n on  %v", off, on)
	}
}

func TestScopesRecordEachParallelBlockOnce(t *testing.T) {
	off := runMixed(t, loom.Config{})
	if n := count(off, "m", event.ParallelCompleted); n != 0 {
		t.Fatalf("PARALLEL_COMPLETED without the flag: %d", n)
	}
	on := runMixed(t, loom.Config{Features: loom.Features{Scopes: true}})
	if n := count(on, "m", event.ParallelCompleted); n != 1 {
		t.Fatalf("PARALLEL_COMPLETED %d times across a replay, want once", n)
	}
	st, _ := on.rt.LoadState(on.ctx(), "m")
	if sc := st.Variables.Scopes["__loom_scope#0"]; sc.Status != "completed" || sc.Branches != 2 {
		t.Fatalf("_scopes %+v", st.Variables.Scopes)
	}
}
