package loom_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// compactWorld is one set of stores with an archive, and the flow
// "steps": n steps, a gate "g" after the gateAt-th, then the rest; each
// step's effect counts its runs.
type compactWorld struct {
	events  *memstore.EventStore
	snaps   *memstore.SnapshotStore
	archive *memstore.ArchiveStore
	runs    atomic.Int64
	n       int
	gateAt  int
}

func newCompactWorld(n, gateAt int) *compactWorld {
	return &compactWorld{events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(),
		archive: memstore.NewArchiveStore(), n: n, gateAt: gateAt}
}

func (w *compactWorld) flow() *loom.Flow {
	return loom.NewFlow("steps", func(ctx *loom.Context, in int) (int, error) {
		for i := range w.n {
			if i == w.gateAt {
				if _, err := ctx.Suspend("g"); err != nil {
					return 0, err
				}
			}
			out, err := ctx.Run(fmt.Sprintf("s%d", i), func(context.Context) (any, error) {
				w.runs.Add(1)
				return in + i, nil
			})
			if err != nil {
				return 0, err
			}
			_ = out
			in++
		}
		return in, nil
	})
}

func (w *compactWorld) open(t testing.TB, withArchive bool) *loom.Runtime {
	t.Helper()
	cfg := loom.Config{Events: w.events, Snapshots: w.snaps, Flows: []*loom.Flow{w.flow()}, StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	if withArchive {
		cfg.Archive = w.archive
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func (w *compactWorld) log(t testing.TB, id string) []event.Envelope {
	t.Helper()
	evs, err := store.Read(context.Background(), w.events, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// history is the archive and the log together: every event, once.
func (w *compactWorld) history(t testing.TB, id string) []event.Envelope {
	t.Helper()
	archived, err := w.archive.ReadArchived(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	log := w.log(t, id)
	out := append([]event.Envelope{log[0]}, archived...)
	for _, e := range log[1:] {
		if len(archived) > 0 && e.Sequence <= archived[len(archived)-1].Sequence {
			t.Fatalf("#%d is in the log and in the archive", e.Sequence)
		}
		out = append(out, e)
	}
	return out
}

func encoded(t testing.TB, s fold.State) string {
	t.Helper()
	b, err := fold.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parkedRun starts "steps" and waits for its park on g.
func parkedRun(t testing.TB, rt *loom.Runtime) string {
	t.Helper()
	ctx := context.Background()
	id, err := rt.Start(ctx, "steps", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestCompactMovesSettledHistoryIntoTheArchiveAndTheExecutionGoesOn(t *testing.T) {
	ctx := context.Background()
	w := newCompactWorld(8, 6)
	rt := w.open(t, true)
	id := parkedRun(t, rt)
	before := w.log(t, id)
	stateBefore, err := rt.LoadState(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Compact(ctx, id, 9)
	if err != nil || res.Through != 9 || res.Archived != 9 {
		t.Fatalf("Compact: %+v %v", res, err)
	}
	archived, err := rt.ReadArchived(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	assertSameEvents(t, "archive", archived, before[1:10])
	assertSameEvents(t, "log", w.log(t, id), append([]event.Envelope{before[0]}, before[10:]...))
	assertSameEvents(t, "history", w.history(t, id), before)
	if again, err := rt.Compact(ctx, id, 5); err != nil || again.Archived != 0 || again.Through != 9 {
		t.Fatalf("a compaction below the point: %+v %v", again, err)
	}

	next := w.open(t, true) // a new process: snapshot + tail
	st, err := next.LoadState(ctx, id)
	if err != nil || encoded(t, st) != encoded(t, stateBefore) {
		t.Fatalf("state after compaction: %v\n%s\nwant\n%s", err, encoded(t, st), encoded(t, stateBefore))
	}
	if err := next.Resume(ctx, id, loom.ResumeEvent{EventType: "g"}); err != nil {
		t.Fatal(err)
	}
	out, err := next.WaitForCompletion(ctx, id)
	if err != nil || string(out.Output) != "8" {
		t.Fatalf("%s %v", out.Output, err)
	}
	if n := w.runs.Load(); n != 8 {
		t.Fatalf("steps ran %d times, want 8: a compacted step ran again", n)
	}
}

func assertSameEvents(t testing.TB, what string, got, want []event.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, _ := event.Encode(got[i])
		w, _ := event.Encode(want[i])
		if string(g) != string(w) {
			t.Fatalf("%s: event %d:\n%s\nwant\n%s", what, i, g, w)
		}
	}
}

func TestCompactRefusalsChangeNothing(t *testing.T) {
	ctx := context.Background()
	w := newCompactWorld(4, 3)
	first := w.open(t, false)
	id := parkedRun(t, first)
	first.Close() // its park snapshot is saved once the drive has ended
	bare := w.open(t, false)
	before := w.log(t, id)
	last := before[len(before)-1].Sequence
	snapsBefore, err := w.snaps.ListSequences(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var nc *loom.NotConfiguredError
	if _, err := bare.Compact(ctx, id, 2); !errors.As(err, &nc) || nc.Field != "Archive" {
		t.Fatalf("without an archive: %v", err)
	}
	rt := w.open(t, true)
	for _, through := range []int64{0, -3, last, last + 5} {
		var ce *loom.CompactError
		if _, err := rt.Compact(ctx, id, through); !errors.As(err, &ce) {
			t.Fatalf("through %d: %v, want *loom.CompactError", through, err)
		}
	}
	if _, err := rt.Compact(ctx, "no-such", 2); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("an unknown execution: %v", err)
	}
	assertSameEvents(t, "log after the refusals", w.log(t, id), before)
	if archived, _ := w.archive.ReadArchived(ctx, id, 0, -1); len(archived) != 0 {
		t.Fatalf("a refusal archived %d events", len(archived))
	}
	if seqs, _ := w.snaps.ListSequences(ctx, id); len(seqs) != len(snapsBefore) {
		t.Fatalf("a refusal saved snapshots: %v, before %v", seqs, snapsBefore)
	}
}

// Reads inside the compacted range are served from a snapshot exactly
// there or refused with *CompactedHistoryError — never a state short of
// the sequence asked for; a fork after the point is a working execution,
// one inside it is refused; a load whose compaction snapshot is gone is
// refused, not folded from a log with a hole.
func TestReadsInsideCompactedHistoryAreServedOrRefused(t *testing.T) {
	ctx := context.Background()
	w := newCompactWorld(8, 6)
	rt := w.open(t, true)
	id := parkedRun(t, rt)
	log := w.log(t, id)
	last := log[len(log)-1].Sequence
	want := map[int64]string{}
	for _, at := range []int64{4, 9, 11} {
		st, err := rt.LoadStateAt(ctx, id, at)
		if err != nil {
			t.Fatal(err)
		}
		want[at] = encoded(t, st)
	}
	if _, err := rt.Compact(ctx, id, 9); err != nil {
		t.Fatal(err)
	}
	var ch *loom.CompactedHistoryError
	if _, err := rt.LoadStateAt(ctx, id, 4); !errors.As(err, &ch) || ch.Through != 9 || ch.At != 4 {
		t.Fatalf("state at #4 inside the compacted range: %v", err)
	}
	for _, at := range []int64{9, 11} {
		st, err := rt.LoadStateAt(ctx, id, at)
		if err != nil || encoded(t, st) != want[at] {
			t.Fatalf("state at #%d: %v", at, err)
		}
	}
	if _, err := rt.Fork(ctx, id, 9, loom.ForkID("inside")); !errors.As(err, &ch) {
		t.Fatalf("a fork inside the compacted range: %v", err)
	}
	if evs := w.log(t, "inside"); len(evs) != 0 {
		t.Fatalf("a refused fork wrote %d events", len(evs))
	}
	fork, err := rt.Fork(ctx, id, last, loom.ForkID("after"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, fork, loom.ResumeEvent{EventType: "g"}); err != nil {
		t.Fatal(err)
	}
	if out, err := rt.WaitForCompletion(ctx, fork); err != nil || string(out.Output) != "8" {
		t.Fatalf("the fork after the point: %s %v", out.Output, err)
	}
	if err := w.snaps.DeleteExecution(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := w.open(t, true).LoadState(ctx, id); !errors.As(err, &ch) || ch.At != -1 {
		t.Fatalf("a load without the compaction snapshot: %v", err)
	}
}

// Property: for any run and any compaction point, a new process's state
// (snapshot + tail) is the fold of every event, archived ones included,
// byte for byte, and the history is the log as it was.
func TestCompactionKeepsTheFoldOfEveryEvent(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		n := rapid.IntRange(2, 24).Draw(rt, "steps")
		w := newCompactWorld(n, rapid.IntRange(1, n-1).Draw(rt, "gateAt"))
		run := w.open(t, true)
		id := parkedRun(t, run)
		if rapid.Bool().Draw(rt, "answered") {
			if err := run.Resume(ctx, id, loom.ResumeEvent{EventType: "g"}); err != nil {
				rt.Fatal(err)
			}
			if _, err := run.WaitForCompletion(ctx, id); err != nil {
				rt.Fatal(err)
			}
		}
		before := w.log(t, id)
		through := rapid.Int64Range(1, before[len(before)-1].Sequence-1).Draw(rt, "through")
		if _, err := run.Compact(ctx, id, through); err != nil {
			rt.Fatal(err)
		}
		st, err := w.open(t, true).LoadState(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if got, want := encoded(t, st), encoded(t, fold.Fold(w.history(t, id))); got != want {
			rt.Fatalf("fold(snapshot, tail)\n%s\n!= fold(all)\n%s", got, want)
		}
		assertSameEvents(t, "history", w.history(t, id), before)
	})
}

// TrimInbox moves consumed messages out of the streams; the execution
// replays (in a new process) and goes on receiving, and a fork after the
// trim copies the stream with its trim point.
func TestTrimInboxMovesConsumedMessagesAndTheExecutionGoesOn(t *testing.T) {
	ctx := context.Background()
	set, open, id, st := parkedCollector(t)
	rt := open()
	var nc *loom.NotConfiguredError
	bare, err := loom.New(loom.Config{Events: set.Events, Flows: []*loom.Flow{collector(6)}, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.TrimInbox(ctx, id); !errors.As(err, &nc) {
		t.Fatalf("without an archive: %v", err)
	}
	moved, err := rt.TrimInbox(ctx, id)
	if err != nil || moved != 2 {
		t.Fatalf("TrimInbox: %d %v", moved, err)
	}
	if again, err := rt.TrimInbox(ctx, id); err != nil || again != 0 {
		t.Fatalf("a second TrimInbox: %d %v", again, err)
	}
	rt.Close()
	next := open() // a new process replays the consumed messages from the execution's own log
	fork, err := next.Fork(ctx, id, st.Sequence, loom.ForkID("fork-after"))
	if err != nil {
		t.Fatalf("a fork after the trim: %v", err)
	}
	for _, target := range []string{id, fork} {
		for _, v := range []int{5, 6} {
			if err := next.Send(ctx, target, "orders", v); err != nil {
				t.Fatal(err)
			}
		}
		res, err := next.WaitForCompletion(ctx, target)
		if err != nil || string(res.Output) != "[1,2,3,4,5,6]" {
			t.Fatalf("%s: %s %v", target, res.Output, err)
		}
	}
}

// parkedCollector is a collector(6) that consumed 4 messages and waits
// for the 5th, on memory stores with an archive; open opens a runtime.
func parkedCollector(t *testing.T) (store.Set, func() *loom.Runtime, string, fold.State) {
	t.Helper()
	ctx := context.Background()
	set := memstore.NewSet()
	open := func() *loom.Runtime {
		rt, err := loom.New(loom.Config{Storage: set, Flows: []*loom.Flow{collector(6)}, Features: loom.Features{Inbox: true},
			StickyParks: -1, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		return rt
	}
	rt := open()
	id, err := rt.Start(ctx, "collect", nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 4; v++ {
		if err := rt.Send(ctx, id, "orders", v); err != nil {
			t.Fatal(err)
		}
	}
	st, err := rt.WaitForSettled(ctx, id)
	for err == nil && (st.Variables.Inbox["orders"].Consumed < 4 || st.Status != fold.StatusSuspended) {
		st, err = rt.WaitForSettled(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	return set, open, id, st
}

func TestRetentionTrimsConsumedMessagesAndADryRunCountsThem(t *testing.T) {
	ctx := context.Background()
	set, open, _, _ := parkedCollector(t)
	rt := open()
	policy := loom.RetentionPolicy{TrimConsumedMessages: true}
	dry, err := rt.ApplyRetention(ctx, policy, true)
	if err != nil || dry.Messages != 2 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	archived := func() int {
		t.Helper()
		page, err := set.Events.ListExecutions(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range page.Executions {
			evs, err := set.Archive.ReadArchived(ctx, x.ExecutionID, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			n += len(evs)
		}
		return n
	}
	if archived() != 0 {
		t.Fatal("a dry run archived")
	}
	rep, err := rt.ApplyRetention(ctx, policy, false)
	if err != nil || rep.Messages != 2 || archived() != 2 {
		t.Fatalf("run: %+v %v, %d archived", rep, err, archived())
	}
}
