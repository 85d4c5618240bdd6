package loom_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store/memstore"
)

// patchedFlow is baseCheckFlow's "order" with a patch: where says before
// which of its steps (or "g", the gate) the new step "n" runs on the
// patched path; minVersion is the Version call's min.
func patchedFlow(runs *atomic.Int64, where string, minVersion int) *loom.Flow {
	step := func(id string) *loom.Step[string, string] {
		return loom.NewStep(id, func(_ context.Context, in string) (string, error) {
			runs.Add(1)
			return in + "+" + id, nil
		})
	}
	return loom.NewFlow("order", func(ctx *loom.Context, in string) (string, error) {
		out := in
		patch := func() error {
			v, err := loom.Version(ctx, "add-n", minVersion, 1)
			if err != nil || v == loom.DefaultVersion {
				return err
			}
			out, err = loom.Run(ctx, step("n"), out)
			return err
		}
		for _, id := range []string{"a", "b"} {
			if id == where {
				if err := patch(); err != nil {
					return "", err
				}
			}
			var err error
			if out, err = loom.Run(ctx, step(id), out); err != nil {
				return "", err
			}
		}
		if where == "g" {
			if err := patch(); err != nil {
				return "", err
			}
		}
		if _, err := ctx.Suspend("g"); err != nil {
			return "", err
		}
		out, err := loom.Run(ctx, step("c"), out)
		return out, err
	})
}

// parkUnder starts "order" under flow and waits for its park.
func parkUnder(t *testing.T, h *harness) string {
	t.Helper()
	id, err := h.rt.Start(h.ctx(), "order", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	return id
}

func patchDecisions(h *harness, id string) int {
	n := 0
	for _, e := range h.log(id) {
		if e.Type == event.DecisionRecorded && strings.Contains(string(e.Payload), "__loom_patch:add-n") {
			n++
		}
	}
	return n
}

// An execution parked under the old code keeps the old path when the
// patched code resumes it, wherever the patch sits before its park; a new
// execution takes the new path, recorded once, and keeps it on replay;
// replay.Check-style checks find both compatible.
func TestPatchedKeepsOldExecutionsOnTheOldPathAndNewOnesOnTheNew(t *testing.T) {
	for _, where := range []string{"b", "g"} {
		t.Run("patch before "+where, func(t *testing.T) {
			var oldRuns, newRuns atomic.Int64
			h := newHarnessWith(t, loom.Config{StickyParks: -1}, baseCheckFlow.build(&oldRuns))
			old := parkUnder(t, h)
			h.rt.Close()

			h.rt = h.open(patchedFlow(&newRuns, where, loom.DefaultVersion))
			check := checkRuntime(t, memstore.NewEventStore(), patchedFlow(&newRuns, where, loom.DefaultVersion))
			if rep := check.CheckReplay(h.ctx(), h.log(old)); !rep.Compatible() {
				t.Fatalf("old parked execution under the patched code: %s", rep)
			}
			if err := h.rt.Resume(h.ctx(), old, loom.ResumeEvent{EventType: "g"}); err != nil {
				t.Fatal(err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), old)
			if err != nil || string(res.Output) != `"x+a+b+c"` {
				t.Fatalf("old execution: %s %v", res.Output, err)
			}
			if n := patchDecisions(h, old); n != 0 {
				t.Fatalf("the old execution recorded the patch %d times", n)
			}
			if rep := check.CheckReplay(h.ctx(), h.log(old)); !rep.Compatible() {
				t.Fatalf("old ended execution: %s", rep)
			}

			fresh := parkUnder(t, h)
			if n := patchDecisions(h, fresh); n != 1 {
				t.Fatalf("the new execution recorded the patch %d times", n)
			}
			if rep := check.CheckReplay(h.ctx(), h.log(fresh)); !rep.Compatible() {
				t.Fatalf("new parked execution: %s", rep)
			}
			h.rt.Close()
			h.rt = h.open(patchedFlow(&newRuns, where, loom.DefaultVersion)) // a new process replays it
			if err := h.rt.Resume(h.ctx(), fresh, loom.ResumeEvent{EventType: "g"}); err != nil {
				t.Fatal(err)
			}
			res, err = h.rt.WaitForCompletion(h.ctx(), fresh)
			want := `"x+a+n+b+c"`
			if where == "g" {
				want = `"x+a+b+n+c"`
			}
			if err != nil || string(res.Output) != want {
				t.Fatalf("new execution: %s %v, want %s", res.Output, err, want)
			}
			if n := patchDecisions(h, fresh); n != 1 {
				t.Fatalf("the replay recorded the patch again (%d)", n)
			}
			// old: a, b, c once each before the patch; new: a, n, b and c;
			// nothing ran twice.
			if o, n := oldRuns.Load(), newRuns.Load(); o != 2 || n != 1+4 {
				t.Fatalf("step runs: %d under the old code, %d under the new", o, n)
			}
		})
	}
}

// Raising min above DefaultVersion drops the old path: an old execution
// resumed under that code fails with *PatchVersionError, and the check
// says so before the deploy.
func TestVersionRefusesAnExecutionOlderThanItsMin(t *testing.T) {
	var runs atomic.Int64
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, baseCheckFlow.build(&runs))
	old := parkUnder(t, h)
	h.rt.Close()
	check := checkRuntime(t, memstore.NewEventStore(), patchedFlow(&runs, "b", 1))
	if rep := check.CheckReplay(h.ctx(), h.log(old)); rep.Compatible() || !strings.Contains(rep.Got, "add-n") {
		t.Fatalf("check: %s", rep)
	}
	h.rt = h.open(patchedFlow(&runs, "b", 1))
	if err := h.rt.Resume(h.ctx(), old, loom.ResumeEvent{EventType: "g"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.rt.WaitForCompletion(h.ctx(), old)
	if err == nil || !strings.Contains(err.Error(), `patch "add-n": this execution is at version 0 but the code supports 1..1`) {
		t.Fatalf("resume under min 1: %v", err)
	}
}
