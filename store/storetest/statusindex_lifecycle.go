package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// seedStatuses appends one execution in each status (and one ended) and
// returns the entries the index must then hold.
func seedStatuses(t *testing.T, s store.EventStore) []store.UnfinishedExecution {
	t.Helper()
	mustAppend(t, s, "run", 0, lifecycle("run", 0, event.ExecutionStarted, testType))
	mustAppend(t, s, "park", 0, lifecycle("park", 0, event.ExecutionStarted, event.ExecutionSuspended))
	mustAppend(t, s, "done", 0, lifecycle("done", 0, event.ExecutionStarted, event.ExecutionCompleted))
	mustAppend(t, s, "cont", 0, append(lifecycle("cont", 0, event.ExecutionStarted), continuedAt("cont", 1, "cont~1", true)))
	return []store.UnfinishedExecution{
		entry("run", store.UnfinishedRunning, 0),
		entry("park", store.UnfinishedSuspended, 1),
		continuedEntry("cont", 1, "cont~1"),
	}
}

// refusals: every refused Append and CopyPrefix — a duplicate, a gap, a
// malformed batch carrying status events, an existing fork target, a
// prefix past the source's end — leaves the index as it was.
func (k indexKit) refusals(t *testing.T) {
	s, x := k.open(t)
	want := seedStatuses(t, s)
	ctx := context.Background()
	refused := []struct {
		name string
		err  error
		is   error
	}{
		{"duplicate end", s.Append(ctx, "run", 1, lifecycle("run", 1, event.ExecutionCompleted)), store.ErrSequenceConflict},
		{"gap", s.Append(ctx, "park", 5, lifecycle("park", 5, event.ExecutionResumed)), store.ErrSequenceConflict},
		{"start of an existing log", s.Append(ctx, "done", 0, lifecycle("done", 0, event.ExecutionStarted)), store.ErrSequenceConflict},
		{"resume at a stale sequence", s.Append(ctx, "done", 1, lifecycle("done", 1, event.ExecutionResumed)), store.ErrSequenceConflict},
		{"successor started at a gap", s.Append(ctx, "cont~1", 1, lifecycle("cont~1", 1, event.ExecutionStarted)), store.ErrSequenceConflict},
		{"non-contiguous batch", s.Append(ctx, "run", 2, []event.Envelope{
			lifecycleAt("run", 2, event.ExecutionSuspended), lifecycleAt("run", 4, event.ExecutionCompleted)}), store.ErrInvalidAppend},
		{"envelope of another execution", s.Append(ctx, "park", 2, lifecycle("run", 2, event.ExecutionCompleted)), store.ErrInvalidAppend},
		{"new log with a bad envelope", s.Append(ctx, "fresh", 0, func() []event.Envelope {
			evs := lifecycle("fresh", 0, event.ExecutionStarted, event.ExecutionSuspended)
			evs[1].ID = ""
			return evs
		}()), store.ErrInvalidAppend},
	}
	for _, r := range refused {
		if !errors.Is(r.err, r.is) {
			t.Fatalf("%s: %v, want %v", r.name, r.err, r.is)
		}
		assertUnfinished(t, x, want...)
	}
	if pc, ok := s.(store.PrefixCopier); ok {
		if err := pc.CopyPrefix(ctx, "park", "run", 1); !errors.Is(err, store.ErrSequenceConflict) {
			t.Fatalf("CopyPrefix onto an existing execution = %v, want store.ErrSequenceConflict", err)
		}
		if err := pc.CopyPrefix(ctx, "park", "cont~1", 5); !errors.Is(err, store.ErrInvalidAppend) {
			t.Fatalf("CopyPrefix past the source = %v, want store.ErrInvalidAppend", err)
		}
		assertUnfinished(t, x, want...)
	}
	// The refusals changed nothing: the right appends still move it.
	mustAppend(t, s, "run", 2, lifecycle("run", 2, event.ExecutionCompleted))
	mustAppend(t, s, "cont~1", 0, lifecycle("cont~1", 0, event.ExecutionStarted))
	assertUnfinished(t, x, want[1], entry("cont~1", store.UnfinishedRunning, 0))
}

// fenced: an append under a stale fence token, ending or moving the
// execution or starting a successor, is refused and leaves the index.
func (k indexKit) fenced(t *testing.T) {
	s, x := k.open(t)
	f, ok := s.(store.Fencer)
	if !ok {
		t.Skip("store does not implement store.Fencer")
	}
	want := seedStatuses(t, s)
	ctx := context.Background()
	for _, c := range []struct {
		exec     string
		expected int64
		typ      string
	}{{"run", 2, event.ExecutionCompleted}, {"park", 2, event.ExecutionResumed}, {"cont~1", 0, event.ExecutionStarted}} {
		old, err := f.AcquireFence(ctx, c.exec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.AcquireFence(ctx, c.exec); err != nil {
			t.Fatal(err)
		}
		err = f.AppendFenced(ctx, c.exec, old, c.expected, lifecycle(c.exec, c.expected, c.typ))
		if !errors.Is(err, store.ErrFenced) {
			t.Fatalf("AppendFenced(%q) under a stale token = %v, want store.ErrFenced", c.exec, err)
		}
		assertUnfinished(t, x, want...)
	}
	tok, err := f.AcquireFence(ctx, "park")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.AppendFenced(ctx, "park", tok, 2, lifecycle("park", 2, event.ExecutionResumed)); err != nil {
		t.Fatalf("AppendFenced under the current token: %v", err)
	}
	assertUnfinished(t, x, want[0], entry("park", store.UnfinishedRunning, 2), want[2])
}

// paging: ids in code-point order (non-ASCII included) across pages of
// every size, with ended executions interleaved that never show; a limit
// below 1 is the store's default page.
func (k indexKit) paging(t *testing.T) {
	s, x := k.open(t)
	var want []store.UnfinishedExecution
	for i := range 40 {
		exec := fmt.Sprintf("exec-%02d", i)
		if i%5 == 4 {
			exec += "-é日本"
		}
		switch i % 4 {
		case 0:
			mustAppend(t, s, exec, 0, lifecycle(exec, 0, event.ExecutionStarted))
			want = append(want, entry(exec, store.UnfinishedRunning, 0))
		case 1:
			mustAppend(t, s, exec, 0, lifecycle(exec, 0, event.ExecutionStarted, event.ExecutionCompleted))
		case 2:
			mustAppend(t, s, exec, 0, lifecycle(exec, 0, event.ExecutionStarted, event.ExecutionSuspended))
			want = append(want, entry(exec, store.UnfinishedSuspended, 1))
		case 3:
			mustAppend(t, s, exec, 0, lifecycle(exec, 0, event.ExecutionStarted, event.ExecutionCancelled))
		}
	}
	mustAppend(t, s, "\U0001F600", 0, lifecycle("\U0001F600", 0, event.ExecutionStarted))
	mustAppend(t, s, "\uFFFD", 0, lifecycle("\uFFFD", 0, event.ExecutionStarted))
	want = append(want, entry("\uFFFD", store.UnfinishedRunning, 0), entry("\U0001F600", store.UnfinishedRunning, 0))
	for _, size := range []int{1, 2, 3, 7, 20, 22, 1000} {
		if got := listUnfinished(t, x, "", size); !slices.Equal(got, want) {
			t.Fatalf("pages of %d:\n got %s\nwant %s", size, renderEntries(got), renderEntries(want))
		}
	}
	if got := listUnfinished(t, x, want[9].ExecutionID, 4); !slices.Equal(got, want[10:]) {
		t.Fatalf("after %q:\n got %s\nwant %s", want[9].ExecutionID, renderEntries(got), renderEntries(want[10:]))
	}
	if got := listUnfinished(t, x, "exec-99", 4); !slices.Equal(got, want[len(want)-2:]) {
		t.Fatalf("after an id that is not listed:\n got %s", renderEntries(got))
	}
	for _, limit := range []int{0, -1} {
		page, err := x.ListUnfinished(context.Background(), "", limit)
		if err != nil || !slices.Equal(page.Executions, want) || page.Next != "" {
			t.Fatalf("ListUnfinished(limit %d) = %s next %q, %v; want every entry on one page", limit,
				renderEntries(page.Executions), page.Next, err)
		}
	}
}

// inboxStreams: the streams of the durable inbox are logs of messages,
// never listed whatever events they hold; the listing still shows them.
func (k indexKit) inboxStreams(t *testing.T) {
	s, x := k.open(t)
	stream := store.InboxStreamPrefix + "4:exec:topic"
	for _, e := range lifecycle(stream, 0, "__loom_message__", event.ExecutionStarted, event.ExecutionSuspended, testType) {
		mustAppend(t, s, stream, e.Sequence, []event.Envelope{e})
	}
	mustAppend(t, s, "exec", 0, lifecycle("exec", 0, event.ExecutionStarted))
	assertUnfinished(t, x, entry("exec", store.UnfinishedRunning, 0))
	assertListed(t, s, stream, "exec")
	if pc, ok := s.(store.PrefixCopier); ok {
		if err := pc.CopyPrefix(context.Background(), "exec", store.InboxStreamPrefix+"copy", 0); err != nil {
			t.Fatalf("CopyPrefix to an inbox stream id: %v", err)
		}
		assertUnfinished(t, x, entry("exec", store.UnfinishedRunning, 0))
	}
}

// workflowID: an entry's workflow id is the one ListExecutions reports,
// also when the first batch carried none.
func (k indexKit) workflowID(t *testing.T) {
	s, x := k.open(t)
	first := lifecycle("exec-w", 0, event.ExecutionStarted)
	first[0].WorkflowID = ""
	mustAppend(t, s, "exec-w", 0, first)
	later := lifecycle("exec-w", 1, testType, event.ExecutionSuspended)
	later[0].WorkflowID = "wf-late"
	later[1].WorkflowID = "wf-later"
	mustAppend(t, s, "exec-w", 1, later)
	mustAppend(t, s, "exec-v", 0, lifecycle("exec-v", 0, event.ExecutionStarted))
	listed := map[string]string{}
	for _, info := range listAll(t, s, "", 10) {
		listed[info.ExecutionID] = info.WorkflowID
	}
	got := listUnfinished(t, x, "", 10)
	if len(got) != 2 {
		t.Fatalf("ListUnfinished = %s, want exec-v and exec-w", renderEntries(got))
	}
	for _, u := range got {
		if u.WorkflowID != listed[u.ExecutionID] {
			t.Fatalf("entry %q has workflow %q, ListExecutions says %q", u.ExecutionID, u.WorkflowID, listed[u.ExecutionID])
		}
	}
	if got[1].WorkflowID != "wf-late" || got[1].Status != store.UnfinishedSuspended {
		t.Fatalf("entry of exec-w = %+v, want suspended with workflow wf-late", got[1])
	}
}

// fork: a copy's entry is that of its prefix, whatever the source's is now,
// and the source's is untouched; a copy that creates a successor hands its
// predecessor over.
func (k indexKit) fork(t *testing.T) {
	s, x := k.open(t)
	pc, ok := s.(store.PrefixCopier)
	if !ok {
		t.Skip("store does not implement store.PrefixCopier")
	}
	ctx := context.Background()
	src := lifecycle("src", 0, event.ExecutionStarted, testType, event.ExecutionSuspended, event.ExecutionResumed,
		event.ExecutionRecovered, event.ExecutionCompleted)
	mustAppend(t, s, "src", 0, src)
	mustAppend(t, s, "plain", 0, batchAt("plain", 0, 3))
	cont := append(lifecycle("cont", 0, event.ExecutionStarted), continuedAt("cont", 1, "succ", true),
		continuedAt("cont", 2, "", false))
	mustAppend(t, s, "cont", 0, cont)
	want := []store.UnfinishedExecution{entry("plain", store.UnfinishedRunning, 0), continuedEntry("cont", 1, "succ")}
	assertUnfinished(t, x, want...)
	for _, c := range []struct {
		through int64
		want    *store.UnfinishedExecution
	}{
		{0, &store.UnfinishedExecution{Status: store.UnfinishedRunning, Sequence: 0}},
		{1, &store.UnfinishedExecution{Status: store.UnfinishedRunning, Sequence: 0}},
		{2, &store.UnfinishedExecution{Status: store.UnfinishedSuspended, Sequence: 2}},
		{3, &store.UnfinishedExecution{Status: store.UnfinishedRunning, Sequence: 3}},
		{4, &store.UnfinishedExecution{Status: store.UnfinishedRunning, Sequence: 3}},
		{5, nil},
	} {
		to := fmt.Sprintf("fork-%d", c.through)
		if err := pc.CopyPrefix(ctx, "src", to, c.through); err != nil {
			t.Fatalf("CopyPrefix(src, %s, %d): %v", to, c.through, err)
		}
		if c.want != nil {
			want = append(want, entry(to, c.want.Status, c.want.Sequence))
		}
		assertUnfinished(t, x, want...)
	}
	if err := pc.CopyPrefix(ctx, "plain", "fork-plain", 1); err != nil {
		t.Fatal(err)
	}
	want = append(want, entry("fork-plain", store.UnfinishedRunning, 0))
	// Through the non-kernel CONTINUED the copy is still continued at 1.
	if err := pc.CopyPrefix(ctx, "cont", "fork-cont", 2); err != nil {
		t.Fatal(err)
	}
	want = append(want, continuedEntry("fork-cont", 1, "succ"))
	assertUnfinished(t, x, want...)
	// Copying into the successor's id creates it: both continued
	// executions waiting for it are handed over.
	if err := pc.CopyPrefix(ctx, "src", "succ", 1); err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(u store.UnfinishedExecution) bool { return u.Status == store.UnfinishedContinued })
	assertUnfinished(t, x, append(want, entry("succ", store.UnfinishedRunning, 0))...)
}

// deleteExecution: a deleted execution leaves the index and an append at 0
// brings it back; deleting a successor lists its predecessor again.
func (k indexKit) deleteExecution(t *testing.T) {
	s, x := k.open(t)
	del, ok := s.(store.ExecutionDeleter)
	if !ok {
		t.Skip("store does not implement store.ExecutionDeleter")
	}
	ctx := context.Background()
	want := seedStatuses(t, s)
	for _, exec := range []string{"run", "done", "never-existed"} {
		if err := del.DeleteExecution(ctx, exec); err != nil {
			t.Fatalf("DeleteExecution(%q): %v", exec, err)
		}
	}
	assertUnfinished(t, x, want[1:]...)
	mustAppend(t, s, "run", 0, lifecycle("run", 0, event.ExecutionStarted, event.ExecutionSuspended))
	mustAppend(t, s, "cont~1", 0, lifecycle("cont~1", 0, event.ExecutionStarted))
	assertUnfinished(t, x, entry("run", store.UnfinishedSuspended, 1), want[1], entry("cont~1", store.UnfinishedRunning, 0))
	if err := del.DeleteExecution(ctx, "cont~1"); err != nil {
		t.Fatal(err)
	}
	assertUnfinished(t, x, entry("run", store.UnfinishedSuspended, 1), want[1], want[2])
	if err := del.DeleteExecution(ctx, "cont"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "cont~1", 0, lifecycle("cont~1", 0, event.ExecutionStarted))
	if err := del.DeleteExecution(ctx, "cont~1"); err != nil {
		t.Fatal(err)
	}
	assertUnfinished(t, x, entry("run", store.UnfinishedSuspended, 1), want[1])
}

// continuation: a continued execution is listed while its successor's log
// is empty, whichever comes first; the successor's first append hands it
// over, for every predecessor waiting for it.
func (k indexKit) continuation(t *testing.T) {
	s, x := k.open(t)
	mustAppend(t, s, "a", 0, append(lifecycle("a", 0, event.ExecutionStarted), continuedAt("a", 1, "a~1", true)))
	mustAppend(t, s, "b", 0, lifecycle("b", 0, event.ExecutionStarted))
	assertUnfinished(t, x, continuedEntry("a", 1, "a~1"), entry("b", store.UnfinishedRunning, 0))
	mustAppend(t, s, "b", 1, []event.Envelope{continuedAt("b", 1, "a~1", true)})
	assertUnfinished(t, x, continuedEntry("a", 1, "a~1"), continuedEntry("b", 1, "a~1"))
	mustAppend(t, s, "a~1", 0, batchAt("a~1", 0, 1))
	assertUnfinished(t, x, entry("a~1", store.UnfinishedRunning, 0))
	mustAppend(t, s, "a~1", 1, lifecycle("a~1", 1, event.ExecutionStarted, event.ExecutionCompleted))
	assertUnfinished(t, x)
	// Continued to a successor that already has events: nothing to start.
	mustAppend(t, s, "c", 0, append(lifecycle("c", 0, event.ExecutionStarted), continuedAt("c", 1, "a~1", true)))
	assertUnfinished(t, x)
	// A continued execution re-opened by a resume no longer waits.
	mustAppend(t, s, "d", 0, append(lifecycle("d", 0, event.ExecutionStarted), continuedAt("d", 1, "d~1", true)))
	mustAppend(t, s, "d", 2, lifecycle("d", 2, event.ExecutionResumed))
	mustAppend(t, s, "d~1", 0, lifecycle("d~1", 0, event.ExecutionStarted, event.ExecutionCompleted))
	assertUnfinished(t, x, entry("d", store.UnfinishedRunning, 2))
}

// closed: ListUnfinished on a closed store returns store.ErrClosed.
func (k indexKit) closed(t *testing.T) {
	s, x := k.open(t)
	seedStatuses(t, s)
	closeStore(t, s)
	if _, err := x.ListUnfinished(context.Background(), "", 10); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ListUnfinished after Close = %v, want store.ErrClosed", err)
	}
}

// reopen: the index survives a close and a reopen, and the reopened store
// keeps it with its appends.
func (k indexKit) reopen(t *testing.T) {
	s, _ := k.open(t)
	want := seedStatuses(t, s)
	closeStore(t, s)
	s = openStore(t, "EventStoreFactory.Reopen", func(t *testing.T) store.EventStore { return k.f.Reopen(t, s) })
	x := indexOf(t, s)
	assertUnfinished(t, x, want...)
	mustAppend(t, s, "run", 2, lifecycle("run", 2, event.ExecutionCompleted))
	mustAppend(t, s, "cont~1", 0, lifecycle("cont~1", 0, event.ExecutionStarted))
	mustAppend(t, s, "done", 2, lifecycle("done", 2, event.ExecutionResumed))
	assertUnfinished(t, x, want[1], entry("cont~1", store.UnfinishedRunning, 0), entry("done", store.UnfinishedRunning, 2))
}
