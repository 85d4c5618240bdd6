package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// deleteFlows: "steps" runs four steps; "napper" sleeps an hour; "mailbox"
// receives one message; "echo" returns its input; "holder" spawns an echo
// child "k", parks on "go", then awaits the child; "park" parks on
// "approve".
func deleteFlows() []*loom.Flow {
	steps := loom.NewFlow("steps", func(c *loom.Context, n int) (int, error) {
		for i := range 4 {
			out, err := c.Run(fmt.Sprintf("s%d", i), func(context.Context) (any, error) { return n + i, nil })
			if err != nil {
				return 0, err
			}
			_ = out
		}
		return n, nil
	})
	napper := loom.NewFlow("napper", func(c *loom.Context, _ int) (int, error) { return 0, c.Sleep(time.Hour) })
	mailbox := loom.NewFlow("mailbox", func(c *loom.Context, _ int) (string, error) { return loom.Receive[string](c, "in") })
	echo := loom.NewFlow("echo", func(c *loom.Context, n int) (int, error) { return n, nil })
	holder := loom.NewFlow("holder", func(c *loom.Context, n int) (int, error) {
		k, err := loom.SpawnChild(c, "echo", "k", n)
		if err != nil {
			return 0, err
		}
		if _, err := loom.Suspend[bool](c, "go"); err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	park := loom.NewFlow("park", func(c *loom.Context, _ int) (int, error) { return loom.Suspend[int](c, "approve") })
	return []*loom.Flow{steps, napper, mailbox, echo, holder, park}
}

// deleteWorld is a runtime over every store of one SQLite file.
type deleteWorld struct {
	st sqlite.Stores
	rt *loom.Runtime
}

func newDeleteWorld(t *testing.T) *deleteWorld {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: deleteFlows(), Features: loom.Features{Inbox: true, Children: true},
		SnapshotEvery: 2, TimerPoll: -1, StickyParks: -1, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	w := &deleteWorld{st: st, rt: rt}
	t.Cleanup(func() {
		if err := errors.Join(w.rt.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	})
	return w
}

// settle closes the runtime, so that every drive has ended and every
// snapshot is saved, and opens another over the same stores.
func (w *deleteWorld) settle(t *testing.T) {
	t.Helper()
	if err := w.rt.Close(); err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: w.st, Flows: deleteFlows(), Features: loom.Features{Inbox: true, Children: true},
		SnapshotEvery: 2, TimerPoll: -1, StickyParks: -1, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w.rt = rt
}

// run starts id and waits until it parks or ends.
func (w *deleteWorld) run(t *testing.T, ctx context.Context, flow, id string, opts ...loom.StartOption) fold.State {
	t.Helper()
	if _, err := w.rt.Start(ctx, flow, 1, append(opts, loom.WithExecutionID(id))...); err != nil {
		t.Fatal(err)
	}
	st, err := w.rt.WaitForSettled(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stored is everything the stores hold, as counts: each log's length,
// snapshot sequences, archived events, and every timer.
type stored struct {
	logs      map[string]int64
	snapshots map[string][]int64
	archived  map[string]int
	timers    []store.Timer
}

func (w *deleteWorld) stored(t *testing.T) stored {
	t.Helper()
	ctx := t.Context()
	s := stored{logs: map[string]int64{}, snapshots: map[string][]int64{}, archived: map[string]int{}}
	page, err := w.st.Events.ListExecutions(ctx, "", 1000)
	if err != nil || page.Next != "" {
		t.Fatalf("listing: %v (next %q)", err, page.Next)
	}
	lister := w.st.Snapshots.(store.SnapshotLister)
	for _, x := range page.Executions {
		s.logs[x.ExecutionID] = x.Length
		if s.snapshots[x.ExecutionID], err = lister.ListSequences(ctx, x.ExecutionID); err != nil {
			t.Fatal(err)
		}
		evs, err := w.st.Archive.ReadArchived(ctx, x.ExecutionID, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		s.archived[x.ExecutionID] = len(evs)
	}
	if s.timers, err = w.st.Timers.Due(ctx, math.MaxInt64, 1000); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s stored) same(o stored) bool {
	return maps.Equal(s.logs, o.logs) && maps.EqualFunc(s.snapshots, o.snapshots, slices.Equal[[]int64]) &&
		maps.Equal(s.archived, o.archived) && slices.EqualFunc(s.timers, o.timers, func(a, b store.Timer) bool {
		return a.Key == b.Key && a.WakeAt == b.WakeAt && a.ExecutionID == b.ExecutionID
	})
}

// streamsOf lists the inbox streams of a chain ("__loom_inbox__:<len>:<chain>:<topic>").
func (s stored) streamsOf(chain string) []string {
	prefix := fmt.Sprintf("%s%d:%s:", store.InboxStreamPrefix, len(chain), chain)
	var out []string
	for _, id := range slices.Sorted(maps.Keys(s.logs)) {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

// TestDeleteExecutionDeletesOneEndedExecutionWithEverythingKeptForIt: a
// dry run reports the log, snapshots, archived history, kernel timers and
// inbox streams of one ended execution and deletes nothing; the delete
// removes exactly those, leaves every other execution as it was, and the
// id can be used again from scratch.
func TestDeleteExecutionDeletesOneEndedExecutionWithEverythingKeptForIt(t *testing.T) {
	w := newDeleteWorld(t)
	ctx := t.Context()
	// A compacted execution: snapshots and archived history.
	w.run(t, ctx, "steps", "compacted")
	if _, err := w.rt.Compact(ctx, "compacted", 3); err != nil {
		t.Fatal(err)
	}
	// A cancelled sleeper with a deadline: its kernel timers.
	w.run(t, ctx, "napper", "napped", loom.WithDeadline(time.UnixMilli(4_000_000_000_000)))
	if err := w.rt.Cancel(ctx, "napped", "enough"); err != nil {
		t.Fatal(err)
	}
	// A message's receiver: its inbox stream.
	w.run(t, ctx, "mailbox", "mailed")
	if err := w.rt.Send(ctx, "mailed", "in", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "mailed"); err != nil {
		t.Fatal(err)
	}
	w.run(t, ctx, "echo", "bystander")
	w.settle(t)
	before := w.stored(t)

	cases := []struct {
		id      string
		archive int
		streams []string
	}{
		{"compacted", before.archived["compacted"], nil},
		{"napped", 0, nil},
		{"mailed", 0, before.streamsOf("mailed")},
	}
	if len(cases[2].streams) != 1 || cases[0].archive != 3 {
		t.Fatalf("the world: streams %v, archived %v", cases[2].streams, before.archived)
	}
	var napTimers []string
	for _, tm := range before.timers {
		if tm.ExecutionID == "napped" {
			napTimers = append(napTimers, tm.Key)
		}
	}
	if !slices.Equal(napTimers, []string{"park:napped", "deadline:napped"}) {
		t.Fatalf("the cancelled sleeper's timers: %v", napTimers)
	}
	for _, c := range cases {
		dry, err := w.rt.DeleteExecution(ctx, c.id, true)
		wantEvents := before.logs[c.id]
		if c.id == "compacted" {
			wantEvents -= 3
		}
		var wantTimers []string
		if c.id == "napped" {
			wantTimers = napTimers
		}
		if err != nil || !dry.DryRun || dry.ExecutionID != c.id || dry.Events != wantEvents || dry.Snapshots != len(before.snapshots[c.id]) ||
			dry.Archived != c.archive || !slices.Equal(dry.InboxStreams, c.streams) || !slices.Equal(dry.Timers, wantTimers) {
			t.Fatalf("dry run of %s: %+v, %v; want %d events, %d snapshots, %d archived, timers %v, streams %v",
				c.id, dry, err, wantEvents, len(before.snapshots[c.id]), c.archive, wantTimers, c.streams)
		}
		if now := w.stored(t); !now.same(before) {
			t.Fatalf("a dry run of %s deleted: %+v -> %+v", c.id, before, now)
		}
	}
	for _, c := range cases {
		dry, _ := w.rt.DeleteExecution(ctx, c.id, true)
		rep, err := w.rt.DeleteExecution(ctx, c.id, false)
		dry.DryRun = false
		if err != nil || fmt.Sprint(rep) != fmt.Sprint(dry) {
			t.Fatalf("delete of %s: %+v, %v; want what the dry run said, %+v", c.id, rep, err, dry)
		}
	}
	after := w.stored(t)
	want := stored{logs: map[string]int64{}, snapshots: map[string][]int64{}, archived: map[string]int{}}
	for id, n := range before.logs {
		if id == "compacted" || id == "napped" || id == "mailed" || slices.Contains(cases[2].streams, id) {
			continue
		}
		want.logs[id], want.snapshots[id], want.archived[id] = n, before.snapshots[id], before.archived[id]
	}
	for _, tm := range before.timers {
		if tm.ExecutionID != "napped" {
			want.timers = append(want.timers, tm)
		}
	}
	if !after.same(want) {
		t.Fatalf("after the deletes: %+v, want %+v", after, want)
	}
	for _, id := range []string{"compacted", "napped"} {
		if _, err := w.rt.LoadState(ctx, id); !errors.Is(err, loom.ErrExecutionNotFound) {
			t.Fatalf("%s after its delete: %v", id, err)
		}
		if archived, _ := w.st.Archive.ReadArchived(ctx, id, 0, -1); len(archived) != 0 {
			t.Fatalf("%s's archive is still there", id)
		}
	}
	// The id is free again, with nothing of its old life.
	if st := w.run(t, ctx, "echo", "compacted"); st.Status != fold.StatusCompleted || st.Sequence != 1 {
		t.Fatalf("a new execution under a deleted id: %s at #%d", st.Status, st.Sequence)
	}
	if _, err := w.rt.DeleteExecution(ctx, "compacted-never", false); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("delete of an unknown id: %v, want ErrExecutionNotFound", err)
	}
}

// TestDeleteExecutionRefusesWhatRetentionWouldKeepAndDeletesNothing: an
// execution that has not ended, one a branch ref points at, a child whose
// live parent has not received its end, a continued execution whose
// successor has not started, an inbox stream, another tenant's and a
// malformed id are refused with a typed error that says what to do, and
// every store is left as it was. Once what kept it is gone, the delete
// goes through.
func TestDeleteExecutionRefusesWhatRetentionWouldKeepAndDeletesNothing(t *testing.T) {
	w := newDeleteWorld(t)
	ctx := t.Context()
	w.run(t, ctx, "park", "parked")
	w.run(t, ctx, "echo", "pinned")
	if _, err := w.rt.Promote(ctx, "main", "pinned"); err != nil {
		t.Fatal(err)
	}
	w.run(t, ctx, "holder", "holder") // parks on "go"; its child holder/k has completed
	if st, err := w.rt.WaitForCompletion(ctx, "holder/k"); err != nil || st.Status != fold.StatusCompleted {
		t.Fatalf("the child: %v %v", st.Status, err)
	}
	// A continued execution whose successor never started (a migrated log).
	chain := []event.Envelope{
		{ID: "relay:0", WorkflowID: "echo", ExecutionID: "relay", Type: event.ExecutionStarted, Sequence: 0, Timestamp: 1,
			Payload: json.RawMessage(`{"input":1}`)},
		{ID: "relay:1", WorkflowID: "echo", ExecutionID: "relay", Type: event.ExecutionContinued, Sequence: 1, Timestamp: 2,
			Payload: json.RawMessage(`{"nextExecutionId":"relay~1","input":2,"chain":{"id":"relay","index":1}}`), Metadata: map[string]json.RawMessage{"kernel": json.RawMessage("true")}},
	}
	if err := w.st.Events.Append(ctx, "relay", 0, chain); err != nil {
		t.Fatal(err)
	}
	w.run(t, ctx, "mailbox", "mailed")
	if err := w.rt.Send(ctx, "mailed", "in", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "mailed"); err != nil {
		t.Fatal(err)
	}
	w.run(t, loom.WithPrincipal(ctx, loom.Principal{ID: "ann", Tenant: "acme"}), "echo", "tenanted")
	w.settle(t)
	before := w.stored(t)
	stream := before.streamsOf("mailed")[0]
	other := loom.WithPrincipal(ctx, loom.Principal{ID: "eve", Tenant: "initech"})

	for _, c := range []struct {
		ctx    context.Context
		id     string
		reason loom.DeleteRefusal
	}{
		{ctx, "parked", loom.DeleteRefusedNotEnded},
		{ctx, "holder", loom.DeleteRefusedNotEnded},
		{ctx, "pinned", loom.DeleteRefusedPinned},
		{ctx, "holder/k", loom.DeleteRefusedAwaited},
		{ctx, "relay", loom.DeleteRefusedSuccessorMissing},
		{ctx, stream, loom.DeleteRefusedInboxStream},
	} {
		for _, dryRun := range []bool{true, false} {
			_, err := w.rt.DeleteExecution(c.ctx, c.id, dryRun)
			var de *loom.DeleteRefusedError
			if !errors.As(err, &de) || de.Reason != c.reason || de.ExecutionID != c.id || de.Detail == "" {
				t.Fatalf("delete of %s (dry run %v): %v, want a *DeleteRefusedError %s", c.id, dryRun, err, c.reason)
			}
		}
	}
	var de *loom.DeleteRefusedError
	if _, err := w.rt.DeleteExecution(ctx, "pinned", false); !errors.As(err, &de) || de.Error() !=
		`loom: delete of "pinned" refused (pinned-by-ref): the branch ref "main" points at it: move or delete the ref first; nothing was deleted` {
		t.Fatalf("the message: %v", err)
	}
	if _, err := w.rt.DeleteExecution(other, "tenanted", false); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("another tenant's delete: %v, want ErrExecutionNotFound", err)
	}
	if _, err := w.rt.DeleteExecution(ctx, "bad\x00id", false); !errors.Is(err, event.ErrInvalidEnvelope) {
		t.Fatalf("a malformed id: %v, want event.ErrInvalidEnvelope", err)
	}
	if now := w.stored(t); !now.same(before) {
		t.Fatalf("a refused delete deleted: %+v -> %+v", before, now)
	}

	// Once the parent has received its child's end, the child may go.
	if err := w.rt.Resume(ctx, "holder", loom.ResumeEvent{EventType: "go", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.DeleteExecution(ctx, "holder/k", false); err != nil {
		t.Fatalf("the child of an ended parent: %v", err)
	}
	if len(w.stored(t).logs) != len(before.logs)-1 {
		t.Fatal("the child's delete deleted something else")
	}
}
