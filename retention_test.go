package loom_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestParseRetentionPolicyIsStrict(t *testing.T) {
	p, err := loom.ParseRetentionPolicy([]byte(`{"terminalTtl":"720h","keepSnapshots":2,"trimConsumedMessages":true}`))
	if err != nil || p.TerminalTTL != 720*time.Hour || p.KeepSnapshots != 2 || !p.TrimConsumedMessages {
		t.Fatalf("%+v %v", p, err)
	}
	if p, err := loom.ParseRetentionPolicy([]byte(`{}`)); err != nil || p != (loom.RetentionPolicy{}) {
		t.Fatalf("the empty policy: %+v %v", p, err)
	}
	for _, c := range []struct{ in, member string }{
		{`{"terminalTTL":"1h"}`, `"terminalTTL"`}, // names are matched exactly
		{`{"ttl":"1h"}`, `"ttl"`},
		{`{"terminalTtl":"-1h"}`, "terminalTtl"},
		{`{"terminalTtl":"a month"}`, "terminalTtl"},
		{`{"keepSnapshots":-1}`, "keepSnapshots"},
		{`{"contentUnpinnedAfter":"24h"}`, "contentUnpinnedAfter"},
		{`{"deleteArchived":true}`, "deleteArchived"}, // without terminalTtl it deletes nothing
		{`[1]`, "(file)"},
	} {
		var pe *loom.RetentionPolicyError
		if _, err := loom.ParseRetentionPolicy([]byte(c.in)); !errors.As(err, &pe) || pe.Member != c.member {
			t.Fatalf("%s: %v, want a *RetentionPolicyError on %s", c.in, err, c.member)
		}
	}
}

// retentionWorld: a runtime on memory stores with a fake clock, an archive
// and branches, running "steps" of compactWorld.
type retentionWorld struct {
	*compactWorld
	clock    *fakeClock
	branches *memstore.BranchRegistry
	rt       *loom.Runtime
}

func newRetentionWorld(t *testing.T, events store.EventStore) *retentionWorld {
	t.Helper()
	w := &retentionWorld{compactWorld: newCompactWorld(4, 2), clock: &fakeClock{now: time.UnixMilli(1_800_000_000_000)},
		branches: memstore.NewBranchRegistry()}
	if events == nil {
		events = w.events
	}
	rt, err := loom.New(loom.Config{Events: events, Snapshots: w.snaps, Archive: w.archive, Branches: w.branches,
		Flows: []*loom.Flow{w.flow()}, Clock: w.clock, StickyParks: -1, SnapshotEvery: 2,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	w.rt = rt
	return w
}

// finished starts and completes one execution.
func (w *retentionWorld) finished(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	id := parkedRun(t, w.rt)
	if err := w.rt.Resume(ctx, id, loom.ResumeEvent{EventType: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestApplyRetentionDeletesEndedExecutionsPastTheirTTLAndADryRunCountsThem(t *testing.T) {
	ctx := context.Background()
	w := newRetentionWorld(t, nil)
	old, pinned := w.finished(t), w.finished(t)
	if _, err := w.rt.Promote(ctx, "main", pinned); err != nil {
		t.Fatal(err)
	}
	w.clock.advance(48 * time.Hour)
	recent, parked := w.finished(t), parkedRun(t, w.rt)
	w.rt.Close() // every drive ended, every snapshot saved
	oldLen := int64(len(w.log(t, old)))
	policy := loom.RetentionPolicy{TerminalTTL: 24 * time.Hour}

	w2 := newRetentionWorldOn(t, w)
	dry, err := w2.ApplyRetention(ctx, policy, true)
	if err != nil || !slices.Equal(dry.Executions, []string{old}) || dry.Events != oldLen || dry.KeptByRef != 1 || !dry.DryRun {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if len(w.log(t, old)) == 0 {
		t.Fatal("a dry run deleted")
	}
	rep, err := w2.ApplyRetention(ctx, policy, false)
	if err != nil || !slices.Equal(rep.Executions, []string{old}) {
		t.Fatalf("run: %+v %v", rep, err)
	}
	if len(w.log(t, old)) != 0 {
		t.Fatal("the expired execution's log is still there")
	}
	if seqs, _ := w.snaps.ListSequences(ctx, old); len(seqs) != 0 {
		t.Fatalf("its snapshots are still there: %v", seqs)
	}
	for _, id := range []string{pinned, recent, parked} {
		if len(w.log(t, id)) == 0 {
			t.Fatalf("%s was deleted", id)
		}
	}
	if again, err := w2.ApplyRetention(ctx, policy, false); err != nil || len(again.Executions) != 0 {
		t.Fatalf("a second run: %+v %v", again, err)
	}
}

// TestApplyRetentionDeletesTheArchivedHistoryOnlyWhenAsked: an expired
// compacted execution's archived events stay by default (the audit
// record) and go with deleteArchived, after which its id can be reused and
// compacted again.
func TestApplyRetentionDeletesTheArchivedHistoryOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	w := newRetentionWorld(t, nil)
	kept, dropped := w.finished(t), w.finished(t)
	for _, id := range []string{kept, dropped} {
		if _, err := w.rt.Compact(ctx, id, 3); err != nil {
			t.Fatal(err)
		}
	}
	w.clock.advance(48 * time.Hour)
	w.rt.Close()
	rt := newRetentionWorldOn(t, w)
	if p, err := loom.ParseRetentionPolicy([]byte(`{"terminalTtl":"24h","deleteArchived":true}`)); err != nil || !p.DeleteArchived {
		t.Fatalf("parse: %+v %v", p, err)
	}
	// kept goes under a policy without deleteArchived: its archive stays.
	if _, err := w.branches.CreateRef(ctx, "hold", dropped); err != nil {
		t.Fatal(err)
	}
	if rep, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{TerminalTTL: 24 * time.Hour}, false); err != nil || !slices.Equal(rep.Executions, []string{kept}) {
		t.Fatalf("without deleteArchived: %+v %v", rep, err)
	}
	if archived, _ := w.archive.ReadArchived(ctx, kept, 0, -1); len(archived) != 3 {
		t.Fatalf("the archive of %s holds %d events after its deletion, want its 3 kept", kept, len(archived))
	}
	if _, err := w.branches.MoveRef(ctx, "hold", kept, store.AnyVersion); err != nil { // release dropped
		t.Fatal(err)
	}
	rep, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{TerminalTTL: 24 * time.Hour, DeleteArchived: true}, false)
	if err != nil || !slices.Equal(rep.Executions, []string{dropped}) {
		t.Fatalf("with deleteArchived: %+v %v", rep, err)
	}
	if archived, _ := w.archive.ReadArchived(ctx, dropped, 0, -1); len(archived) != 0 {
		t.Fatalf("the archive of %s still holds %d events", dropped, len(archived))
	}
}

// newRetentionWorldOn opens a second runtime on w's stores.
func newRetentionWorldOn(t *testing.T, w *retentionWorld) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: w.events, Snapshots: w.snaps, Archive: w.archive, Branches: w.branches,
		Flows: []*loom.Flow{w.flow()}, Clock: w.clock, StickyParks: -1, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestApplyRetentionPrunesSnapshotsButKeepsTheCompactionCheckpoint(t *testing.T) {
	ctx := context.Background()
	w := newRetentionWorld(t, nil)
	plain, compacted := w.finished(t), w.finished(t)
	if _, err := w.rt.Compact(ctx, compacted, 3); err != nil {
		t.Fatal(err)
	}
	w.rt.Close()
	before, _ := w.snaps.ListSequences(ctx, plain)
	if len(before) < 2 {
		t.Fatalf("the run saved snapshots %v; the test needs 2 or more", before)
	}
	rt := newRetentionWorldOn(t, w)
	stateBefore, err := rt.LoadState(ctx, compacted)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{KeepSnapshots: 1}, false)
	if err != nil || rep.Snapshots == 0 || len(rep.Executions) != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	if after, _ := w.snaps.ListSequences(ctx, plain); !slices.Equal(after, before[len(before)-1:]) {
		t.Fatalf("plain: kept %v of %v, want the latest", after, before)
	}
	if after, _ := w.snaps.ListSequences(ctx, compacted); !slices.Contains(after, 3) {
		t.Fatalf("compacted: kept %v, without the compaction checkpoint #3", after)
	}
	if st, err := rt.LoadState(ctx, compacted); err != nil || encoded(t, st) != encoded(t, stateBefore) {
		t.Fatalf("the compacted execution after pruning: %v", err)
	}
}

// noDelete hides memstore's ExecutionDeleter.
type noDelete struct{ store.EventStore }

func TestApplyRetentionRefusesWhatItsStoresCannotDo(t *testing.T) {
	ctx := context.Background()
	w := newRetentionWorld(t, nil)
	id := w.finished(t)
	w.clock.advance(48 * time.Hour)
	w.rt.Close()
	rt, err := loom.New(loom.Config{Events: noDelete{w.events}, Clock: w.clock, Flows: []*loom.Flow{w.flow()},
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var nc *loom.NotConfiguredError
	if _, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{TerminalTTL: time.Hour}, false); !errors.As(err, &nc) ||
		!strings.Contains(err.Error(), "ExecutionDeleter") {
		t.Fatalf("no deleter: %v", err)
	}
	if _, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{KeepSnapshots: 1}, false); !errors.As(err, &nc) {
		t.Fatalf("no snapshot store: %v", err)
	}
	if _, err := rt.ApplyRetention(ctx, loom.RetentionPolicy{TerminalTTL: -time.Hour}, false); err == nil {
		t.Fatal("a negative TTL was applied")
	}
	if len(w.log(t, id)) == 0 {
		t.Fatal("a refused retention deleted")
	}
}

// An expired execution takes its inbox streams with it, and a chain's
// streams go with the chain's last execution, never while a successor may
// read them; an execution that has not expired keeps its own.
func TestApplyRetentionDeletesTheInboxStreamsOfAnEndedChain(t *testing.T) {
	ctx := context.Background()
	events, clock := memstore.NewEventStore(), &fakeClock{now: time.UnixMilli(1_800_000_000_000)}
	// relay receives one message, and continues as new once with it.
	relay := loom.NewFlow("relay", func(c *loom.Context, hops int) (string, error) {
		v, err := loom.Receive[string](c, "in")
		if err != nil || hops > 0 {
			return v, err
		}
		return "", c.ContinueAsNew(hops + 1)
	})
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{relay}, Clock: clock,
		Features: loom.Features{Inbox: true, ContinueAsNew: true}, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	streamsOf := func() []string {
		var out []string
		page, err := events.ListExecutions(ctx, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			if store.IsInboxStream(x.ExecutionID) {
				out = append(out, x.ExecutionID)
			}
		}
		return out
	}
	// The chain: a's message, then its successor's.
	if _, err := rt.Start(ctx, "relay", 0, loom.WithExecutionID("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Send(ctx, "a", "in", "one"); err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitForSettled(ctx, "a")
	if err != nil || st.Status != "continued" {
		t.Fatalf("a: %v, %v; want it continued", st.Status, err)
	}
	next := st.Variables.ContinuedTo
	if _, err := rt.WaitForSuspend(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := rt.Send(ctx, next, "in", "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, next); err != nil {
		t.Fatal(err)
	}
	clock.advance(48 * time.Hour)
	// b has not expired: its stream stays.
	if _, err := rt.Start(ctx, "relay", 1, loom.WithExecutionID("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Send(ctx, "b", "in", "three"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if n := len(streamsOf()); n != 2 {
		t.Fatalf("inbox streams before: %v, want the chain's and b's", streamsOf())
	}
	policy := loom.RetentionPolicy{TerminalTTL: 24 * time.Hour}
	dry, err := rt.ApplyRetention(ctx, policy, true)
	if err != nil || dry.InboxStreams != 1 || len(streamsOf()) != 2 {
		t.Fatalf("dry run: %+v %v; streams %v", dry, err, streamsOf())
	}
	rep, err := rt.ApplyRetention(ctx, policy, false)
	if err != nil || !slices.Equal(rep.Executions, []string{"a", next}) || rep.InboxStreams != 1 {
		t.Fatalf("run: %+v %v", rep, err)
	}
	left := streamsOf()
	if len(left) != 1 || !strings.Contains(left[0], ":b:") {
		t.Fatalf("inbox streams after: %v, want b's alone", left)
	}
}
