package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

var childrenOn = loom.Config{Features: loom.Features{Children: true}}

// The child flows: "double" returns twice its input, "refuse" fails,
// "held" parks on a gate until it is told its result.
func childFlows() []*loom.Flow {
	double := loom.NewFlow("double", func(c *loom.Context, n int) (int, error) { return 2 * n, nil })
	refuse := loom.NewFlow("refuse", func(c *loom.Context, n int) (int, error) {
		return 0, fmt.Errorf("refusing %d", n)
	})
	held := loom.NewFlow("held", func(c *loom.Context, n int) (int, error) {
		return loom.Suspend[int](c, "release")
	})
	return []*loom.Flow{double, refuse, held}
}

// fanOut spawns double(1), double(2) and refuse(3), awaits them all with
// AwaitChildren, then AwaitAll, and returns the outputs and the failure.
func fanOut() *loom.Flow {
	return loom.NewFlow("fan-out", func(c *loom.Context, _ struct{}) (map[string]any, error) {
		var kids []loom.Child
		for i, flow := range []string{"double", "double", "refuse"} {
			k, err := loom.SpawnChild(c, flow, fmt.Sprintf("k%d", i+1), i+1)
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		results, err := loom.AwaitChildren(c, kids)
		if err != nil {
			return nil, err
		}
		var statuses []string
		for _, r := range results {
			statuses = append(statuses, string(r.Status))
		}
		_, allErr := loom.AwaitAll(c, kids)
		var cf *loom.ChildFailedError
		if !errors.As(allErr, &cf) {
			return nil, fmt.Errorf("AwaitAll = %v, want a childFailed", allErr)
		}
		first, err := loom.AwaitChildTyped[int](c, kids[1])
		if err != nil {
			return nil, err
		}
		return map[string]any{"statuses": statuses, "failed": cf.ChildID, "k2": first}, nil
	})
}

// TestChildrenFanOutAndAwait: a parent spawns three children under
// deterministic ids, waits for all of them and gets each result in the
// order given; AwaitAll fails with the failed child's childFailed; the
// children record their parent; a second drive of the parent (replay from
// the log) starts no child again.
func TestChildrenFanOutAndAwait(t *testing.T) {
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			h := newHarnessWith(t, withSticky(childrenOn, sticky), append(childFlows(), fanOut())...)
			id, err := h.rt.Start(h.ctx(), "fan-out", nil, loom.WithExecutionID("order-9"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || res.Status != fold.StatusCompleted {
				t.Fatalf("fan-out: %v, %v (%s)", res.Status, err, res.Output)
			}
			var out struct {
				Statuses []string `json:"statuses"`
				Failed   string   `json:"failed"`
				K2       int      `json:"k2"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out.Statuses, []string{"completed", "completed", "failed"}) || out.Failed != "order-9/k3" || out.K2 != 4 {
				t.Fatalf("fan-out output %s", res.Output)
			}
			for _, k := range []string{"order-9/k1", "order-9/k2", "order-9/k3"} {
				st, err := h.rt.LoadState(h.ctx(), k)
				if err != nil {
					t.Fatal(err)
				}
				if string(st.Variables.Parent) != `{"executionId":"order-9","name":"`+strings.TrimPrefix(k, "order-9/")+`"}` {
					t.Fatalf("%s records parent %s", k, st.Variables.Parent)
				}
			}
			// Replay: the whole parent re-folds and re-runs from its log as
			// recorded, and no fourth execution exists.
			log, err := store.Read(h.ctx(), h.events, id)
			if err != nil {
				t.Fatal(err)
			}
			if rep := h.rt.CheckReplay(h.ctx(), log); rep.Verdict != loom.ReplayCompatible {
				t.Fatalf("CheckReplay = %+v", rep)
			}
			page, err := h.events.ListExecutions(h.ctx(), "", 100)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(page.Executions); n != 4 {
				t.Fatalf("%d executions in the store, want the parent and its 3 children", n)
			}
		})
	}
}

// TestChildEndingAfterTheParentParksWakesIt: the parent parks first (the
// child waits on a gate), the child's end answers the parent's park.
func TestChildEndingAfterTheParentParksWakesIt(t *testing.T) {
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) {
			parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
				k, err := loom.SpawnChild(c, "held", "h", 0)
				if err != nil {
					return 0, err
				}
				return loom.AwaitChildTyped[int](c, k)
			})
			h := newHarnessWith(t, withSticky(childrenOn, sticky), append(childFlows(), parent)...)
			id, err := h.rt.Start(h.ctx(), "parent", nil, loom.WithExecutionID("p"))
			if err != nil {
				t.Fatal(err)
			}
			st, err := h.rt.WaitForSuspend(h.ctx(), id)
			if err != nil || st.Variables.SuspendedOn.CorrelationKey != "p/h" {
				t.Fatalf("parent parked %+v, %v; want it awaiting p/h", st.Variables.SuspendedOn, err)
			}
			if _, err := h.rt.WaitForSuspend(h.ctx(), "p/h"); err != nil {
				t.Fatal(err)
			}
			// Nobody but the kernel answers a child park.
			before := logLength(t, h.events, id)
			err = h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "__loom_child__", Payload: json.RawMessage(`{"childId":"p/h","status":"completed","output":1}`)})
			var rr *loom.ResumeRefusedError
			if !errors.As(err, &rr) || logLength(t, h.events, id) != before {
				t.Fatalf("a caller's answer to the child park = %v, log %d → %d; want refused, nothing appended", err, before, logLength(t, h.events, id))
			}
			if err := h.rt.Resume(h.ctx(), "p/h", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`21`)}); err != nil {
				t.Fatal(err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || string(res.Output) != "21" {
				t.Fatalf("parent: %s, %v; want the child's 21", res.Output, err)
			}
		})
	}
}

// TestChildFailureComposesUpTheTree: root → mid → leaf; the leaf fails,
// mid does not catch it, and root's childFailed names the path to the
// leaf with the leaf's own message.
func TestChildFailureComposesUpTheTree(t *testing.T) {
	mid := loom.NewFlow("mid", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "refuse", "leaf", 7)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	root := loom.NewFlow("root", func(c *loom.Context, _ struct{}) (map[string]any, error) {
		k, err := loom.SpawnChild(c, "mid", "mid", nil)
		if err != nil {
			return nil, err
		}
		_, err = loom.AwaitChild(c, k)
		var cf *loom.ChildFailedError
		if !errors.As(err, &cf) {
			return nil, fmt.Errorf("root: want a childFailed, got %v", err)
		}
		leaf := cf.Cause()
		if leaf == nil {
			return nil, fmt.Errorf("root: the childFailed holds no cause: %s", cf.Err)
		}
		return map[string]any{"path": cf.Path(), "leaf": leaf.Error()}, nil
	})
	h := newHarnessWith(t, childrenOn, append(childFlows(), mid, root)...)
	id, err := h.rt.Start(h.ctx(), "root", nil, loom.WithExecutionID("r"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("root: %v, %v", res.Status, err)
	}
	want := `{"leaf":"loom: child \"r/mid/leaf\" failed: refusing 7","path":["r/mid","r/mid/leaf"]}`
	if string(res.Output) != want {
		t.Fatalf("root output %s\nwant %s", res.Output, want)
	}
}

// TestRecoverAnswersAParentAChildEndedWithout: the child ends in a
// process that never wakes the parent (a crash between the child's end
// and the wake-up, modelled by a runtime without Features.Children); the
// next Recover answers the parent.
func TestRecoverAnswersAParentAChildEndedWithout(t *testing.T) {
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "held", "h", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	flows := append(childFlows(), parent)
	h := newHarnessWith(t, withSticky(childrenOn, false), flows...)
	if _, err := h.rt.Start(h.ctx(), "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "p/h"); err != nil {
		t.Fatal(err)
	}
	h.rt.Close()

	h.cfg = withSticky(loom.Config{}, false)
	h.rt = h.open(flows...)
	if err := h.rt.Resume(h.ctx(), "p/h", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`5`)}); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "p/h"); err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("child: %v, %v", res.Status, err)
	}
	if st, err := h.rt.LoadState(h.ctx(), "p"); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("parent %v, %v; want it still parked (nobody woke it)", st.Status, err)
	}
	h.rt.Close()

	h.cfg = withSticky(childrenOn, false)
	h.rt = h.open(flows...)
	if _, err := h.rt.Recover(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "p"); err != nil || string(res.Output) != "5" {
		t.Fatalf("parent after Recover: %s, %v; want the child's 5", res.Output, err)
	}
}

// TestCancelledChildReachesItsParent: cancelling a parked child ends it,
// and its parent gets a childFailed with status cancelled.
func TestCancelledChildReachesItsParent(t *testing.T) {
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (string, error) {
		k, err := loom.SpawnChild(c, "held", "h", 0)
		if err != nil {
			return "", err
		}
		_, err = loom.AwaitChild(c, k)
		var cf *loom.ChildFailedError
		if errors.As(err, &cf) && cf.Status == fold.StatusCancelled {
			return "child cancelled", nil
		}
		return "", fmt.Errorf("want a cancelled child, got %v", err)
	})
	h := newHarnessWith(t, childrenOn, append(childFlows(), parent)...)
	if _, err := h.rt.Start(h.ctx(), "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "p"); err != nil { // the spawn is durable by then
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "p/h"); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Cancel(h.ctx(), "p/h", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "p"); err != nil || string(res.Output) != `"child cancelled"` {
		t.Fatalf("parent: %s, %v", res.Output, err)
	}
}

// TestSpawnRefusals: without Features.Children, or for an unknown flow, a
// spawn is refused before anything is recorded or started.
func TestSpawnRefusals(t *testing.T) {
	spawner := func(flow string) *loom.Flow {
		return loom.NewFlow("spawn-"+flow, func(c *loom.Context, _ struct{}) (string, error) {
			_, err := loom.SpawnChild(c, flow, "k", 1)
			if err == nil {
				return "spawned", nil
			}
			return err.Error(), nil
		})
	}
	for name, tc := range map[string]struct {
		cfg  loom.Config
		flow string
		want string
	}{
		"feature off":  {loom.Config{}, "double", "Features.Children"},
		"unknown flow": {childrenOn, "nope", "nope"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessWith(t, tc.cfg, append(childFlows(), spawner(tc.flow))...)
			id, err := h.rt.Start(h.ctx(), "spawn-"+tc.flow, nil, loom.WithExecutionID("s"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || !strings.Contains(string(res.Output), tc.want) {
				t.Fatalf("spawn: %s, %v; want a refusal naming %q", res.Output, err, tc.want)
			}
			log, err := store.Read(h.ctx(), h.events, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range log {
				if e.Type == event.StepStarted || e.Type == event.StepCompleted {
					t.Fatalf("the refused spawn recorded %s", e.Type)
				}
			}
			if evs, _ := store.Read(h.ctx(), h.events, "s/k"); len(evs) != 0 {
				t.Fatal("the refused spawn started a child")
			}
		})
	}
}

func logLength(t *testing.T, s store.EventStore, id string) int {
	t.Helper()
	evs, err := store.Read(context.Background(), s, id)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestParentCloseCancelsItsChildrenByPolicy: a parent that ends without
// awaiting its children cancels those of policy cancel (the default),
// leaves those of policy abandon running, and a cancelled parent takes its
// whole subtree with it.
func TestParentCloseCancelsItsChildrenByPolicy(t *testing.T) {
	quick := loom.NewFlow("quick", func(c *loom.Context, _ struct{}) (string, error) {
		if _, err := loom.SpawnChild(c, "held", "c", 0); err != nil {
			return "", err
		}
		if _, err := loom.SpawnChild(c, "held", "a", 0, loom.OnParentClose(loom.CloseAbandon)); err != nil {
			return "", err
		}
		return "left them", nil
	})
	mid := loom.NewFlow("mid", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "held", "leaf", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	root := loom.NewFlow("root", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "mid", "mid", nil)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	h := newHarnessWith(t, childrenOn, append(childFlows(), quick, mid, root)...)
	if _, err := h.rt.Start(h.ctx(), "quick", nil, loom.WithExecutionID("q")); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "q"); err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("quick: %v, %v", res.Status, err)
	}
	// Children close in spawn-step order: "a" (abandon) was passed over
	// before "c" was cancelled.
	if res, err := h.rt.WaitForCompletion(h.ctx(), "q/c"); err != nil || res.Status != fold.StatusCancelled {
		t.Fatalf("q/c is %v, %v; want cancelled with its parent", res.Status, err)
	}
	if st, err := h.rt.WaitForSuspend(h.ctx(), "q/a"); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("q/a is %v, %v; want it abandoned, still parked", st.Status, err)
	}

	if _, err := h.rt.Start(h.ctx(), "root", nil, loom.WithExecutionID("r")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r", "r/mid", "r/mid/leaf"} {
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.rt.Cancel(h.ctx(), "r", "stop"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r", "r/mid", "r/mid/leaf"} {
		if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || res.Status != fold.StatusCancelled {
			t.Fatalf("%s is %v, %v; want cancelled with the root", id, res.Status, err)
		}
	}
}

// TestRecoverCancelsAChildItsParentLeft: the parent ended where its
// children could not be closed (modelled by a runtime without
// Features.Children); Recover cancels the orphan.
func TestRecoverCancelsAChildItsParentLeft(t *testing.T) {
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "held", "h", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	flows := append(childFlows(), parent)
	h := newHarnessWith(t, childrenOn, flows...)
	if _, err := h.rt.Start(h.ctx(), "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p", "p/h"} {
		if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	h.rt.Close()
	h.cfg = loom.Config{}
	h.rt = h.open(flows...)
	if err := h.rt.Cancel(h.ctx(), "p", "stop"); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.rt.LoadState(h.ctx(), "p/h"); st.Status != fold.StatusSuspended {
		t.Fatalf("p/h is %v; want it left parked", st.Status)
	}
	h.rt.Close()
	h.cfg = childrenOn
	h.rt = h.open(flows...)
	if _, err := h.rt.Recover(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if st, err := h.rt.LoadState(h.ctx(), "p/h"); err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("p/h is %v, %v after Recover; want cancelled", st.Status, err)
	}
}

// TestAwaitFollowsAChildThatContinuesAsNew: the parent's await follows
// the child's continue-as-new chain to its end.
func TestAwaitFollowsAChildThatContinuesAsNew(t *testing.T) {
	counter := loom.NewFlow("counter", func(c *loom.Context, n int) (int, error) {
		if n < 3 {
			return 0, c.ContinueAsNew(n + 1)
		}
		return n * 10, nil
	})
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "counter", "c", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	cfg := childrenOn
	cfg.Features.ContinueAsNew = true
	h := newHarnessWith(t, cfg, counter, parent)
	if _, err := h.rt.Start(h.ctx(), "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "p"); err != nil || string(res.Output) != "30" {
		t.Fatalf("parent: %v %s, %v; want the chain's last output 30", res.Status, res.Output, err)
	}
}

// TestAwaitingAChildNeverSpawnedIsRefused: awaiting a child this execution
// did not spawn (a made-up id, or another parent's child) is a typed
// *UnknownChildError, not a park that never ends, and nothing is recorded
// for the await.
func TestAwaitingAChildNeverSpawnedIsRefused(t *testing.T) {
	for name, child := range map[string]loom.Child{
		"made up":        {ID: "a/ghost", Name: "ghost", Flow: "double"},
		"no name":        {ID: "a/k1", Flow: "double"},
		"another parent": {ID: "other/k1", Name: "k1", Flow: "double"},
	} {
		t.Run(name, func(t *testing.T) {
			awaiter := loom.NewFlow("await-ghost", func(c *loom.Context, _ struct{}) (string, error) {
				if _, err := loom.SpawnChild(c, "double", "k1", 1); err != nil {
					return "", err
				}
				_, err := loom.AwaitChild(c, child)
				var uc *loom.UnknownChildError
				if !errors.As(err, &uc) || uc.ChildID != child.ID {
					return "", fmt.Errorf("AwaitChild = %v, want an *UnknownChildError for %q", err, child.ID)
				}
				return err.Error(), nil
			})
			h := newHarnessWith(t, childrenOn, append(childFlows(), awaiter)...)
			id, err := h.rt.Start(h.ctx(), "await-ghost", nil, loom.WithExecutionID("a"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.rt.WaitForCompletion(h.ctx(), id)
			if err != nil || res.Status != fold.StatusCompleted || !strings.Contains(string(res.Output), "SpawnChild returned") {
				t.Fatalf("await of an unknown child: %+v, %v", res, err)
			}
			log, err := store.Read(h.ctx(), h.events, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range log {
				if e.Type == event.ExecutionSuspended {
					t.Fatalf("the refused await parked the parent: %s", e.Payload)
				}
			}
		})
	}
}

// TestSpawnOntoATakenIDIsRefused: a spawn whose child id is taken by an
// execution that is not this parent's child of that name is refused with
// *ChildIDError before anything is recorded; the other execution's log is
// untouched.
func TestSpawnOntoATakenIDIsRefused(t *testing.T) {
	spawner := loom.NewFlow("spawn-taken", func(c *loom.Context, _ struct{}) (string, error) {
		_, err := loom.SpawnChild(c, "double", "k", 1)
		var ce *loom.ChildIDError
		if !errors.As(err, &ce) || ce.ChildID != "p/k" {
			return "", fmt.Errorf("SpawnChild = %v, want a *ChildIDError for p/k", err)
		}
		return err.Error(), nil
	})
	h := newHarnessWith(t, childrenOn, append(childFlows(), spawner)...)
	if _, err := h.rt.Start(h.ctx(), "double", 5, loom.WithExecutionID("p/k")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForCompletion(h.ctx(), "p/k"); err != nil {
		t.Fatal(err)
	}
	before := logLength(t, h.events, "p/k")
	if _, err := h.rt.Start(h.ctx(), "spawn-taken", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), "p")
	if err != nil || res.Status != fold.StatusCompleted || !strings.Contains(string(res.Output), "taken") {
		t.Fatalf("spawn onto a taken id: %+v, %v", res, err)
	}
	log, err := store.Read(h.ctx(), h.events, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if e.Type == event.StepStarted || e.Type == event.StepCompleted || e.Type == event.StepFailed {
			t.Fatalf("the refused spawn recorded %s: %s", e.Type, e.Payload)
		}
	}
	if after := logLength(t, h.events, "p/k"); after != before {
		t.Fatalf("the taken execution's log grew from %d to %d", before, after)
	}
}

// TestCloseWaitKeepsTheParentUntilItsChildEnds: a parent that returns
// without awaiting a child of policy wait does not end until the child
// does, then records its own result — with sticky parks (the parked drive
// answered in place) and without (the parent replayed from its log, which
// waits the same way); a parent cancelled from outside ends at once and
// leaves its wait child running.
func TestCloseWaitKeepsTheParentUntilItsChildEnds(t *testing.T) {
	for _, sticky := range []bool{true, false} {
		t.Run(fmt.Sprint("sticky=", sticky), func(t *testing.T) { closeWaitCase(t, sticky) })
	}
}

func closeWaitCase(t *testing.T, sticky bool) {
	waiter := loom.NewFlow("waiter", func(c *loom.Context, _ struct{}) (string, error) {
		if _, err := loom.SpawnChild(c, "held", "w", 0, loom.OnParentClose(loom.CloseWait)); err != nil {
			return "", err
		}
		if _, err := loom.SpawnChild(c, "held", "x", 0, loom.OnParentClose(loom.CloseAbandon)); err != nil {
			return "", err
		}
		return "returned", nil
	})
	h := newHarnessWith(t, withSticky(childrenOn, sticky), append(childFlows(), waiter)...)
	if _, err := h.rt.Start(h.ctx(), "waiter", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	st, err := h.rt.WaitForSuspend(h.ctx(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if awaited, ok := loom.AwaitedChild(st); !ok || awaited != "p/w" {
		t.Fatalf("the returned parent waits on %q (%v), want its wait child p/w", awaited, ok)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "p/w"); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Resume(h.ctx(), "p/w", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`7`)}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), "p")
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != `"returned"` {
		t.Fatalf("the parent after its wait child ended: %+v, %v", res, err)
	}
	if x, err := h.rt.WaitForSuspend(h.ctx(), "p/x"); err != nil || x.Status != fold.StatusSuspended {
		t.Fatalf("the abandoned child: %v, %v; want it left parked", x.Status, err)
	}

	// A cancelled parent ends at once; its wait child runs on.
	if _, err := h.rt.Start(h.ctx(), "waiter", nil, loom.WithExecutionID("q")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(h.ctx(), "q"); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.Cancel(h.ctx(), "q", "stop"); err != nil {
		t.Fatal(err)
	}
	if q, err := h.rt.LoadState(h.ctx(), "q"); err != nil || q.Status != fold.StatusCancelled {
		t.Fatalf("the cancelled parent: %v, %v", q.Status, err)
	}
	if _, err := h.rt.Recover(h.ctx()); err != nil {
		t.Fatal(err)
	}
	if w, err := h.rt.WaitForSuspend(h.ctx(), "q/w"); err != nil || w.Status != fold.StatusSuspended {
		t.Fatalf("the wait child of a cancelled parent: %v, %v; want it parked still, not cancelled", w.Status, err)
	}
	if err := h.rt.Resume(h.ctx(), "q/w", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), "q/w"); err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("the wait child after its parent's cancel: %+v, %v", res, err)
	}
}

// A recovery pass on another node that finds nothing to answer a parked
// parent with (its child has not ended) takes neither its lease nor its
// fence: the node holding the parent's sticky park answers it later under
// its own fencing token, and the parent completes instead of aborting on
// a fence nobody wrote behind.
func TestADeliveryWithNothingToAnswerTakesNoFence(t *testing.T) {
	events, leases := memstore.NewEventStore(), memstore.NewLeaseStore()
	parent := loom.NewFlow("parent", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "held", "k", 0)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	node := func(name string) *loom.Runtime {
		rt, err := loom.New(loom.Config{Events: events, Leases: leases, NodeID: name, Heartbeat: -1,
			Features: loom.Features{Children: true}, Recovery: loom.Recovery{Disabled: true},
			Flows: append(childFlows(), parent), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	a, b := node("a"), node("b")
	ctx := testCtx(t)
	if _, err := a.Start(ctx, "parent", nil, loom.WithExecutionID("p")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitForSuspend(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitForSuspend(ctx, "p/k"); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Read(ctx, events, "p")
	if _, err := b.Recover(ctx); err != nil { // looks at the parked parent: nothing to answer it with
		t.Fatal(err)
	}
	if after, _ := store.Read(ctx, events, "p"); len(after) != len(before) {
		t.Fatalf("a delivery with nothing to deliver appended: %d -> %d events", len(before), len(after))
	}
	if l, ok, _ := leases.Get(ctx, "p"); ok && l.Owner == "b" {
		t.Fatalf("node b took the parent's lease with nothing to answer: %+v", l)
	}
	if err := a.Resume(ctx, "p/k", loom.ResumeEvent{EventType: "release", Payload: json.RawMessage(`7`)}); err != nil {
		t.Fatal(err)
	}
	res, err := a.WaitForCompletion(ctx, "p")
	if err != nil || string(res.Output) != "7" {
		t.Fatalf("the parent: %s, %v; want it completed with its child's 7", res.Output, err)
	}
}
