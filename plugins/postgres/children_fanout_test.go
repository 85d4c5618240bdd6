package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/fanouttest"
	"github.com/loom-kernel/loom/store"
)

// A fan-out of fanChildren children across three nodes (runtimes) over one
// schema. The parent, started on node A, spawns every child on A and
// awaits them all with AwaitChildren; each child runs one recorded step
// and parks on fanGate. The test answers child i's gate on node i%3, as
// three callers at once, each in spawn order: that node drives the child
// to its end and wakes the parent through the store, wherever the parent
// is parked; an await of a child that ended first is answered in place.

const (
	fanChildren = 1000
	fanParent   = "fan"
	fanGate     = "release"
	// fanTimeout guards the run against a hang; no wait is paced by it.
	fanTimeout = 2 * time.Minute
)

// fanFlows are the child flow "held" (one recorded step, 2n, then the
// answer to fanGate added) and the parent "fan", which spawns n of them
// (child i gets i) and returns their results in order.
func fanFlows() []*loom.Flow {
	double := loom.NewStep("double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	held := loom.NewFlow("held", func(c *loom.Context, n int) (int, error) {
		v, err := loom.Run(c, double, n)
		if err != nil {
			return 0, err
		}
		answer, err := loom.Suspend[int](c, fanGate)
		return v + answer, err
	})
	parent := loom.NewFlow("fan", func(c *loom.Context, n int) ([]loom.ChildResult, error) {
		kids := make([]loom.Child, 0, n)
		for i := range n {
			k, err := loom.SpawnChild(c, "held", fanChildName(i), i)
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		return loom.AwaitChildren(c, kids)
	})
	return []*loom.Flow{held, parent}
}

func fanChildName(i int) string { return fmt.Sprintf("k%04d", i) }

// fanNode is one node: its own storage (pool) on schema and a runtime,
// closed at cleanup.
func fanNode(t *testing.T, schema, name string) *loom.Runtime {
	t.Helper()
	st, err := Storage(context.Background(), testOptions(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: fanFlows(), Features: loom.Features{Children: true}, NodeID: name,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(errors.Join(err, st.Close()))
	}
	t.Cleanup(func() {
		rt.Close()
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}

// TestFanOutOfAThousandChildrenAcrossThreeNodes: the parent completes, as
// node A reads it, with every child's result in spawn order (child i
// completed with 3i); exactly fanChildren children exist, each started
// once, first, as the parent's child of its name, and completed; and a
// fourth runtime's replay of the parent's log is compatible and writes no
// child.
func TestFanOutOfAThousandChildrenAcrossThreeNodes(t *testing.T) {
	schema := newSchema(t)
	nodes := []*loom.Runtime{fanNode(t, schema, "a"), fanNode(t, schema, "b"), fanNode(t, schema, "c")}
	a := nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), fanTimeout)
	defer cancel()
	if _, err := a.Start(ctx, "fan", fanChildren, loom.WithExecutionID(fanParent)); err != nil {
		t.Fatal(err)
	}
	// The parent's first park comes after its last spawn: every child has
	// started by then.
	if _, err := a.WaitForSuspend(ctx, fanParent); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for n, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := n; i < fanChildren; i += len(nodes) {
				id := loom.ChildID(fanParent, fanChildName(i))
				if _, err := node.WaitForSuspend(ctx, id); err != nil {
					errs[n] = fmt.Errorf("%s: %w", id, err)
					return
				}
				if err := node.Resume(ctx, id, loom.ResumeEvent{EventType: fanGate, Payload: json.RawMessage(strconv.Itoa(i))}); err != nil {
					errs[n] = fmt.Errorf("resume of %s on node %d: %w", id, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	res, err := a.WaitForCompletion(ctx, fanParent)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("parent on node A: %v, %v", res.Status, err)
	}
	var results []loom.ChildResult
	if err := json.Unmarshal(res.Output, &results); err != nil || len(results) != fanChildren {
		t.Fatalf("the parent returned %d results (%v), want %d", len(results), err, fanChildren)
	}
	for i, r := range results {
		if want := loom.ChildID(fanParent, fanChildName(i)); r.ChildID != want || r.Status != fold.StatusCompleted || string(r.Output) != strconv.Itoa(3*i) {
			t.Fatalf("result %d: %s %s %s, want %s completed with %d", i, r.ChildID, r.Status, r.Output, want, 3*i)
		}
	}

	events := openDB(t, schema).EventStore()
	before := checkFanChildren(ctx, t, events)
	d := fanNode(t, schema, "d")
	log, err := store.Read(ctx, events, fanParent)
	if err != nil {
		t.Fatal(err)
	}
	if rep := d.CheckReplay(ctx, log); rep.Verdict != loom.ReplayCompatible {
		t.Fatalf("CheckReplay of the parent on a fourth runtime = %+v", rep)
	}
	if after := checkFanChildren(ctx, t, events); after != before {
		t.Fatalf("the children's logs held %d events before the replay, %d after", before, after)
	}
}

// checkFanChildren checks the schema holds the parent and exactly
// fanChildren children, each started once, first, as the parent's child
// of its name, and completed with 3i; it returns the events of their logs.
func checkFanChildren(ctx context.Context, t *testing.T, events store.EventStore) int {
	t.Helper()
	return fanouttest.CheckChildren(ctx, t, events, fanParent, fanChildren, fanChildName, func(i int) string { return strconv.Itoa(3 * i) })
}
