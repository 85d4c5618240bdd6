package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// indexKit carries the factory through the StatusIndex subtests.
type indexKit struct{ f EventStoreFactory }

// RunStatusIndex runs the StatusIndex conformance kit against the event
// stores f builds, which must implement store.StatusIndex (the kit fails
// otherwise): every status transition, the continued-to-successor
// hand-over, refused writes leaving the index unchanged, concurrent
// appenders, paging, inbox streams left out, fork copies, deletion,
// agreement with the fold on seeded logs, Close, and Reopen when f.Reopen
// is set. Subtests that need store.PrefixCopier, store.ExecutionDeleter or
// store.Fencer skip, by name, when the store lacks it.
func RunStatusIndex(t *testing.T, f EventStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: EventStoreFactory.New is nil")
	}
	k := indexKit{f: f}
	t.Run("Transitions", k.transitions)
	t.Run("PendingIsRunning", k.pendingIsRunning)
	t.Run("Continuation", k.continuation)
	t.Run("RefusalsLeaveTheIndex", k.refusals)
	t.Run("FencedAppendLeavesTheIndex", k.fenced)
	t.Run("ConcurrentAppenders", k.concurrentAppenders)
	t.Run("ConcurrentSameSequence", k.concurrentSameSequence)
	t.Run("Paging", k.paging)
	t.Run("InboxStreamsExcluded", k.inboxStreams)
	t.Run("WorkflowIDOfTheListing", k.workflowID)
	t.Run("ForkCopiesTheIndex", k.fork)
	t.Run("DeleteExecution", k.deleteExecution)
	t.Run("AgreesWithTheFold", k.agreesWithFold)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: EventStoreFactory.Reopen is nil, so the index's durability across a reopen is not checked")
	}
}

// open returns a fresh store for one subtest and its index.
func (k indexKit) open(t *testing.T) (store.EventStore, store.StatusIndex) {
	t.Helper()
	s := openStore(t, "EventStoreFactory.New", k.f.New)
	return s, indexOf(t, s)
}

func indexOf(t *testing.T, s store.EventStore) store.StatusIndex {
	t.Helper()
	x, ok := s.(store.StatusIndex)
	if !ok {
		t.Fatalf("storetest: %T does not implement store.StatusIndex", s)
	}
	return x
}

// Event builders. Every envelope is envelopeAt's, with a type and payload
// of the lifecycle event it stands for.

// lifecycleAt returns the event of type typ at seq of exec.
func lifecycleAt(exec string, seq int64, typ string) event.Envelope {
	e := envelopeAt(exec, seq)
	e.Type = typ
	switch typ {
	case event.ExecutionStarted:
		e.Payload = json.RawMessage(`{"input":{"n":1}}`)
	case event.ExecutionSuspended:
		e.Payload = json.RawMessage(`{"on":"approval"}`)
	case event.ExecutionResumed:
		e.Payload = json.RawMessage(`{"eventType":"approve","payload":{"ok":true}}`)
	case event.ExecutionCompleted:
		e.Payload = json.RawMessage(`{"output":1}`)
	case event.ExecutionFailed:
		e.Payload = json.RawMessage(`{"error":{"message":"boom"}}`)
	}
	return e
}

// lifecycle returns contiguous events of exec from from, one per type.
func lifecycle(exec string, from int64, types ...string) []event.Envelope {
	out := make([]event.Envelope, len(types))
	for i, typ := range types {
		out[i] = lifecycleAt(exec, from+int64(i), typ)
	}
	return out
}

// continuedAt is EXECUTION_CONTINUED at seq handing over to next ("" names
// none), kernel-stamped when kernel is set.
func continuedAt(exec string, seq int64, next string, kernel bool) event.Envelope {
	e := envelopeAt(exec, seq)
	e.Type = event.ExecutionContinued
	e.Payload = json.RawMessage(`{"input":null}`)
	if next != "" {
		e.Payload = json.RawMessage(`{"nextExecutionId":` + strconv.Quote(next) + `,"input":{"n":2},"chain":{"id":"c","index":1}}`)
	}
	if kernel {
		e.Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	}
	return e
}

// entry is the index entry the kit expects for exec, set by the event at
// seq (timestamps are envelopeAt's).
func entry(exec string, status store.UnfinishedStatus, seq int64) store.UnfinishedExecution {
	return store.UnfinishedExecution{ExecutionID: exec, WorkflowID: "wf-storetest", Status: status,
		Sequence: seq, Timestamp: baseTimestamp + seq}
}

// continuedEntry is the entry of a continued exec handing over to next.
func continuedEntry(exec string, seq int64, next string) store.UnfinishedExecution {
	e := entry(exec, store.UnfinishedContinued, seq)
	e.NextExecutionID = next
	return e
}

// listUnfinished pages through the whole index with pageSize and checks the
// paging contract on the way, like listAll.
func listUnfinished(t *testing.T, x store.StatusIndex, after string, pageSize int) []store.UnfinishedExecution {
	t.Helper()
	return pageThrough(t, "ListUnfinished", after, pageSize, func(cursor string) ([]store.UnfinishedExecution, string, error) {
		page, err := x.ListUnfinished(context.Background(), cursor, pageSize)
		return page.Executions, page.Next, err
	}, func(u store.UnfinishedExecution) string { return u.ExecutionID })
}

// assertUnfinished fails the test unless the index holds exactly want.
func assertUnfinished(t *testing.T, x store.StatusIndex, want ...store.UnfinishedExecution) {
	t.Helper()
	got := listUnfinished(t, x, "", 7)
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b store.UnfinishedExecution) int { return cmpString(a.ExecutionID, b.ExecutionID) })
	if !slices.Equal(got, want) {
		t.Fatalf("ListUnfinished:\n got %s\nwant %s", renderEntries(got), renderEntries(want))
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func renderEntries(es []store.UnfinishedExecution) string {
	if len(es) == 0 {
		return "(none)"
	}
	s := ""
	for _, e := range es {
		s += fmt.Sprintf("\n\t%q %s@%d ts %d wf %q", e.ExecutionID, e.Status, e.Sequence, e.Timestamp, e.WorkflowID)
		if e.NextExecutionID != "" {
			s += " next " + strconv.Quote(e.NextExecutionID)
		}
	}
	return s
}

// transitions: one execution walks through every status-moving event and
// the events that move none; after each append its entry is the one its
// last status-moving event decides.
func (k indexKit) transitions(t *testing.T) {
	s, x := k.open(t)
	const exec = "exec-t"
	steps := []struct {
		name   string
		events []event.Envelope
		want   []store.UnfinishedExecution // nil: not listed
	}{
		{"started", lifecycle(exec, 0, event.ExecutionStarted), entries(entry(exec, store.UnfinishedRunning, 0))},
		{"a step keeps it", lifecycle(exec, 1, testType), entries(entry(exec, store.UnfinishedRunning, 0))},
		{"suspended", lifecycle(exec, 2, event.ExecutionSuspended), entries(entry(exec, store.UnfinishedSuspended, 2))},
		{"a wake-up keeps it", lifecycle(exec, 3, event.TimerFired), entries(entry(exec, store.UnfinishedSuspended, 2))},
		{"resumed", lifecycle(exec, 4, event.ExecutionResumed), entries(entry(exec, store.UnfinishedRunning, 4))},
		{"recovered and migrated move nothing", lifecycle(exec, 5, event.ExecutionRecovered, event.ExecutionMigrated),
			entries(entry(exec, store.UnfinishedRunning, 4))},
		{"the last of a batch wins", lifecycle(exec, 7, event.ExecutionSuspended, event.ExecutionResumed, event.ExecutionSuspended, testType),
			entries(entry(exec, store.UnfinishedSuspended, 9))},
		{"a continue without the kernel stamp is inert", []event.Envelope{continuedAt(exec, 11, "exec-t~1", false)},
			entries(entry(exec, store.UnfinishedSuspended, 9))},
		{"completed", lifecycle(exec, 12, event.ExecutionCompleted), nil},
		{"a step after the end", lifecycle(exec, 13, testType), nil},
		{"re-opened by a resume", lifecycle(exec, 14, event.ExecutionResumed), entries(entry(exec, store.UnfinishedRunning, 14))},
		{"failed", lifecycle(exec, 15, event.ExecutionFailed), nil},
		{"resumed after the failure", lifecycle(exec, 16, event.ExecutionResumed), entries(entry(exec, store.UnfinishedRunning, 16))},
		{"cancelled", lifecycle(exec, 17, event.ExecutionCancelled), nil},
		{"suspended after the end", lifecycle(exec, 18, event.ExecutionSuspended), entries(entry(exec, store.UnfinishedSuspended, 18))},
		{"continued", []event.Envelope{continuedAt(exec, 19, "exec-t~1", true)}, entries(continuedEntry(exec, 19, "exec-t~1"))},
		{"resumed after the continue", lifecycle(exec, 20, event.ExecutionResumed), entries(entry(exec, store.UnfinishedRunning, 20))},
		{"continued to nobody", []event.Envelope{continuedAt(exec, 21, "", true)}, nil},
		{"suspended, then ended in one batch", lifecycle(exec, 22, event.ExecutionSuspended, event.ExecutionCompleted), nil},
		{"ended, then re-opened in one batch", lifecycle(exec, 24, event.ExecutionCompleted, testType, event.ExecutionResumed, testType),
			entries(entry(exec, store.UnfinishedRunning, 26))},
	}
	next := int64(0)
	for _, st := range steps {
		mustAppend(t, s, exec, next, st.events)
		next += int64(len(st.events))
		got := listUnfinished(t, x, "", 10)
		if !slices.Equal(got, st.want) {
			t.Fatalf("after %q: ListUnfinished:\n got %s\nwant %s", st.name, renderEntries(got), renderEntries(st.want))
		}
	}
}

// entries is its arguments as a slice.
func entries(es ...store.UnfinishedExecution) []store.UnfinishedExecution { return es }

// pendingIsRunning: a log with no status-moving event is the fold's
// pending and listed as running at its first event; its start moves it.
func (k indexKit) pendingIsRunning(t *testing.T) {
	s, x := k.open(t)
	mustAppend(t, s, "exec-p", 0, batchAt("exec-p", 0, 2))
	assertUnfinished(t, x, entry("exec-p", store.UnfinishedRunning, 0))
	mustAppend(t, s, "exec-p", 2, batchAt("exec-p", 2, 3))
	assertUnfinished(t, x, entry("exec-p", store.UnfinishedRunning, 0))
	mustAppend(t, s, "exec-p", 5, lifecycle("exec-p", 5, event.ExecutionStarted))
	assertUnfinished(t, x, entry("exec-p", store.UnfinishedRunning, 5))
	// A first batch that starts and ends the execution leaves no entry.
	mustAppend(t, s, "exec-q", 0, lifecycle("exec-q", 0, event.ExecutionStarted, testType, event.ExecutionCompleted))
	assertUnfinished(t, x, entry("exec-p", store.UnfinishedRunning, 5))
}

// concurrentAppenders: 16 goroutines each walk their own execution
// through suspends and resumes at once; every entry ends as its own log
// decides.
func (k indexKit) concurrentAppenders(t *testing.T) {
	s, x := k.open(t)
	const appenders, rounds = 16, 10
	var wg sync.WaitGroup
	for w := range appenders {
		wg.Go(func() {
			exec := fmt.Sprintf("exec-c%02d", w)
			types := []string{event.ExecutionStarted}
			for range rounds {
				types = append(types, testType, event.ExecutionSuspended, event.ExecutionResumed)
			}
			switch w % 3 {
			case 0:
				types = append(types, event.ExecutionCompleted)
			case 1:
				types = append(types, event.ExecutionSuspended)
			}
			for seq, e := range lifecycle(exec, 0, types...) {
				if err := s.Append(context.Background(), exec, int64(seq), []event.Envelope{e}); err != nil {
					t.Errorf("Append(%q, %d): %v", exec, seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var want []store.UnfinishedExecution
	last := int64(3 * rounds)
	for w := range appenders {
		exec := fmt.Sprintf("exec-c%02d", w)
		switch w % 3 {
		case 1:
			want = append(want, entry(exec, store.UnfinishedSuspended, last+1))
		case 2:
			want = append(want, entry(exec, store.UnfinishedRunning, last))
		}
	}
	assertUnfinished(t, x, want...)
}

// concurrentSameSequence: contenders race to append different status
// events at one expected sequence; exactly one wins and the entry is the
// winner's, whatever the losers carried.
func (k indexKit) concurrentSameSequence(t *testing.T) {
	s, x := k.open(t)
	const exec, contenders = "exec-race", 8
	mustAppend(t, s, exec, 0, lifecycle(exec, 0, event.ExecutionStarted))
	choices := []string{event.ExecutionSuspended, event.ExecutionCompleted, event.ExecutionResumed, testType}
	want := entry(exec, store.UnfinishedRunning, 0)
	for round := range int64(12) {
		expected := round + 1
		errs := make([]error, contenders)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for c := range contenders {
			wg.Go(func() {
				e := lifecycleAt(exec, expected, choices[(c+int(round))%len(choices)])
				e.ID = fmt.Sprintf("r%d-c%d", round, c)
				<-start
				errs[c] = s.Append(context.Background(), exec, expected, []event.Envelope{e})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for c, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: contenders %d and %d both appended", round, winner, c)
			case err == nil:
				winner = c
			case !errors.Is(err, store.ErrSequenceConflict):
				t.Fatalf("round %d: contender %d: %v, want store.ErrSequenceConflict", round, c, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no contender appended", round)
		}
		var wants []store.UnfinishedExecution
		switch choices[(winner+int(round))%len(choices)] {
		case event.ExecutionSuspended:
			want = entry(exec, store.UnfinishedSuspended, expected)
		case event.ExecutionResumed:
			want = entry(exec, store.UnfinishedRunning, expected)
		case event.ExecutionCompleted:
			want = store.UnfinishedExecution{}
		}
		if want.ExecutionID != "" {
			wants = append(wants, want)
		}
		assertUnfinished(t, x, wants...)
	}
}
