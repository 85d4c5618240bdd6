package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/internal/fanouttest"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// A fan-out of fanChildren child flows on a SQLite file: the parent spawns
// them all, awaits them with AwaitChildren and parks on fanFinishGate; a
// second runtime over the reopened file answers that gate, which replays
// the parent from its log (every spawn and every await served, no child
// started again) to its end. A variant kills the store in the middle of
// the fan-out and recovers in a fresh runtime.

const (
	fanChildren   = 1000
	fanParent     = "fan"
	fanFinishGate = "finish"
	// fanTimeout guards a run against a hang; no wait is paced by it.
	fanTimeout = 2 * time.Minute
)

var doubleStep = loom.NewStep("double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })

// fanFlows are the child flow "leaf" (one recorded step: 2n) and the
// parent "fan", which spawns n leaves (child i gets i), awaits them all
// and returns their results in order; with finish it parks on
// fanFinishGate first.
func fanFlows(finish bool) []*loom.Flow {
	leaf := loom.NewFlow("leaf", func(c *loom.Context, n int) (int, error) { return loom.Run(c, doubleStep, n) })
	parent := loom.NewFlow("fan", func(c *loom.Context, n int) ([]loom.ChildResult, error) {
		kids := make([]loom.Child, 0, n)
		for i := range n {
			k, err := loom.SpawnChild(c, "leaf", fanChildName(i), i)
			if err != nil {
				return nil, err
			}
			kids = append(kids, k)
		}
		results, err := loom.AwaitChildren(c, kids)
		if err != nil || !finish {
			return results, err
		}
		if _, err := loom.Suspend[struct{}](c, fanFinishGate); err != nil {
			return nil, err
		}
		return results, nil
	})
	return []*loom.Flow{leaf, parent}
}

func fanChildName(i int) string { return fmt.Sprintf("k%04d", i) }

// fanRuntime builds a runtime over events and snapshots of one SQLite
// file, recovery left to the test.
func fanRuntime(t *testing.T, cfg loom.Config, finish bool) *loom.Runtime {
	t.Helper()
	cfg.Flows = fanFlows(finish)
	cfg.Features = loom.Features{Children: true}
	cfg.Recovery = loom.Recovery{Disabled: true}
	cfg.Logger = slog.New(slog.DiscardHandler)
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestFanOutOfAThousandChildren: the parent completes with every child's
// result, completed with 2i, in spawn order; exactly fanChildren children
// exist, each started once as this parent's child of its name; and the
// second runtime's replay of the parent, through the whole fan-out, starts
// and writes no child again.
func TestFanOutOfAThousandChildren(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fan.db")
	ctx, cancel := context.WithTimeout(context.Background(), fanTimeout)
	defer cancel()

	st := openFanStorage(t, path)
	rt := fanRuntime(t, loom.Config{Storage: st}, true)
	if _, err := rt.Start(ctx, "fan", fanChildren, loom.WithExecutionID(fanParent)); err != nil {
		t.Fatal(err)
	}
	waitForPark(ctx, t, st.Events, fanParent, fanFinishGate)
	closeFan(t, rt, st)
	childEvents := checkFanChildren(ctx, t, path)

	// A new process: the Resume replays the parent from its log.
	st = openFanStorage(t, path)
	rt = fanRuntime(t, loom.Config{Storage: st}, true)
	defer closeFan(t, rt, st)
	if err := rt.Resume(ctx, fanParent, loom.ResumeEvent{EventType: fanFinishGate, Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, fanParent)
	if err != nil || res.Status != fold.StatusCompleted {
		t.Fatalf("parent: %v, %v", res.Status, err)
	}
	checkFanResults(t, res.Output)
	if again := checkFanChildrenIn(ctx, t, st.Events); again != childEvents {
		t.Fatalf("the children's logs held %d events before the replay, %d after: the replay wrote to a child", childEvents, again)
	}
	log, err := store.Read(ctx, st.Events, fanParent)
	if err != nil {
		t.Fatal(err)
	}
	if rep := rt.CheckReplay(ctx, log); rep.Verdict != loom.ReplayCompatible {
		t.Fatalf("CheckReplay of the parent = %+v", rep)
	}
}

// TestFanOutSurvivesAKilledStore kills the store after a number of events
// (a crash: what the runtime had not written is lost, batches cut to a
// durable prefix) in the middle of the spawns and in the middle of the
// awaits; a fresh runtime over the reopened file recovers, and the parent
// completes with every result, no child started twice.
func TestFanOutSurvivesAKilledStore(t *testing.T) {
	// Spawning writes about six events a child (the spawn step's two, the
	// child's four), awaiting two (the park and its answer): 1.5k events
	// fall among the spawns, 7k in the middle of the awaits, where a batch
	// cut between a park and its answer leaves the parent parked on a
	// child that ended (Recover answers it).
	for _, killAfter := range []int{fanChildren + fanChildren/2, 7 * fanChildren} {
		t.Run(fmt.Sprint("kill-after-", killAfter), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fan.db")
			ctx, cancel := context.WithTimeout(context.Background(), fanTimeout)
			defer cancel()

			st := openFanStorage(t, path)
			fault := crashtest.NewFaultStore(st.Events)
			fault.KillAfter(killAfter)
			// No leases: the second runtime stands for the same node
			// restarted, whose recovery need not wait out its own leases.
			rt := fanRuntime(t, loom.Config{Events: fault, Snapshots: st.Snapshots}, false)
			if _, err := rt.Start(ctx, "fan", fanChildren, loom.WithExecutionID(fanParent)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-fault.Killed():
			case <-ctx.Done():
				t.Fatal("the store was never killed")
			}
			closeFan(t, rt, st)
			spawns, answers := durableProgress(ctx, t, path)
			t.Logf("killed with %d spawns and %d awaits of the parent durable", spawns, answers)

			st = openFanStorage(t, path)
			rt = fanRuntime(t, loom.Config{Events: st.Events, Snapshots: st.Snapshots}, false)
			defer closeFan(t, rt, st)
			if _, err := rt.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := rt.WaitForCompletion(ctx, fanParent)
			if err != nil || res.Status != fold.StatusCompleted {
				t.Fatalf("parent after recovery: %v, %v", res.Status, err)
			}
			checkFanResults(t, res.Output)
			checkFanChildrenIn(ctx, t, st.Events)
		})
	}
}

func openFanStorage(t *testing.T, path string) sqlite.Stores {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// closeFan closes the runtime, then the storage, as a process exiting.
func closeFan(t *testing.T, rt *loom.Runtime, st sqlite.Stores) {
	t.Helper()
	rt.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitForPark follows id's durable log until it parks on gate.
func waitForPark(ctx context.Context, t *testing.T, events store.EventStore, id, gate string) {
	t.Helper()
	sub, err := events.(store.Subscriber).Subscribe(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for e := range sub.Events() {
		var p struct {
			On string `json:"on"`
		}
		if e.Type == event.ExecutionSuspended && json.Unmarshal(e.Payload, &p) == nil && p.On == gate {
			return
		}
		if e.Type == event.ExecutionCompleted || e.Type == event.ExecutionFailed {
			t.Fatalf("%s ended (%s: %s) instead of parking on %q", id, e.Type, e.Payload, gate)
		}
	}
	t.Fatalf("%s never parked on %q: %v", id, gate, sub.Err())
}

// durableProgress opens the file on its own and counts the parent's
// durable spawns and answered awaits.
func durableProgress(ctx context.Context, t *testing.T, path string) (spawns, answers int) {
	t.Helper()
	st := openFanStorage(t, path)
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	log, err := store.Read(ctx, st.Events, fanParent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		switch e.Type {
		case event.StepCompleted:
			spawns++
		case event.ExecutionResumed:
			answers++
		}
	}
	return spawns, answers
}

// checkFanResults checks the parent's output: fanChildren results, the
// i-th of child i, completed with 2i.
func checkFanResults(t *testing.T, output json.RawMessage) {
	t.Helper()
	var results []loom.ChildResult
	if err := json.Unmarshal(output, &results); err != nil {
		t.Fatalf("parent output: %v", err)
	}
	if len(results) != fanChildren {
		t.Fatalf("the parent returned %d results, want %d", len(results), fanChildren)
	}
	for i, r := range results {
		if want := loom.ChildID(fanParent, fanChildName(i)); r.ChildID != want || r.Status != fold.StatusCompleted || string(r.Output) != fmt.Sprint(2*i) {
			t.Fatalf("result %d: %s %s %s, want %s completed with %d", i, r.ChildID, r.Status, r.Output, want, 2*i)
		}
	}
}

// checkFanChildren opens the file on its own and checks its children.
func checkFanChildren(ctx context.Context, t *testing.T, path string) int {
	t.Helper()
	st := openFanStorage(t, path)
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	return checkFanChildrenIn(ctx, t, st.Events)
}

// checkFanChildrenIn checks the store holds the parent and exactly
// fanChildren children, each started once, first, as the parent's child
// of its name, and completed with 2i; it returns the events of their logs.
func checkFanChildrenIn(ctx context.Context, t *testing.T, events store.EventStore) int {
	t.Helper()
	return fanouttest.CheckChildren(ctx, t, events, fanParent, fanChildren, fanChildName, func(i int) string { return fmt.Sprint(2 * i) })
}
