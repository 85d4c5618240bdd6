package journal

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

type failingAppends struct {
	store.EventStore
	fail  atomic.Bool
	calls atomic.Int64
}

func (f *failingAppends) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	f.calls.Add(1)
	if f.fail.Load() {
		return errors.New("disk full")
	}
	return f.EventStore.Append(ctx, id, expected, evs)
}

func testJournal(s store.EventStore) *Journal {
	n := 0
	return New(s, "ex", "wf", fold.Initial(), WithClock(func() int64 { return 42 }), WithIDs(func() string { n++; return "e" + string(rune('a'+n)) }))
}

func TestJournalAllocatesContiguousSequencesAndFoldsSynchronously(t *testing.T) {
	mem := memstore.NewEventStore()
	j := testJournal(mem)
	for i := range 5 {
		e, err := j.Commit(event.StepStarted, map[string]any{"stepId": "s", "attempt": i + 1}, nil)
		if err != nil || e.Sequence != int64(i) {
			t.Fatalf("commit %d: seq %d, %v", i, e.Sequence, err)
		}
		if st := j.State(); st.Sequence != int64(i) {
			t.Fatalf("fold lags the commit: %d", st.Sequence)
		}
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _ := store.Read(context.Background(), mem, "ex")
	if len(evs) != 5 {
		t.Fatalf("durable events: %d", len(evs))
	}
}

func TestJournalWriteFailureAbortsAtTheNextBarrierWithATypedError(t *testing.T) {
	s := &failingAppends{EventStore: memstore.NewEventStore()}
	j := testJournal(s)
	if _, err := j.Commit(event.ExecutionStarted, map[string]any{"input": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.fail.Store(true)
	if _, err := j.Commit(event.StepStarted, map[string]any{"stepId": "s"}, nil); err != nil {
		t.Fatal(err) // the commit itself is in memory; the failure is asynchronous
	}
	err := j.Barrier(context.Background())
	var je *Error
	if !errors.As(err, &je) || je.Sequence != 1 {
		t.Fatalf("barrier = %v, want *Error at sequence 1", err)
	}
	if _, err := j.Commit(event.StepCompleted, map[string]any{"stepId": "s"}, nil); !errors.As(err, &je) {
		t.Fatalf("commit after the failure = %v", err)
	}
}

func TestJournalSealsAfterATerminalEvent(t *testing.T) {
	j := testJournal(memstore.NewEventStore())
	if _, err := j.CommitTerminal(event.ExecutionCancelled, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Commit(event.StepStarted, map[string]any{"stepId": "late"}, nil); !errors.Is(err, ErrSealed) {
		t.Fatalf("commit after the terminal event = %v", err)
	}
}

func TestJournalRefusesAnInvalidEnvelopeWithoutAllocating(t *testing.T) {
	j := testJournal(memstore.NewEventStore())
	if _, err := j.Commit("bad\x00type", nil, nil); !errors.Is(err, event.ErrInvalidEnvelope) {
		t.Fatalf("err = %v", err)
	}
	e, err := j.Commit(event.ExecutionStarted, nil, nil)
	if err != nil || e.Sequence != 0 {
		t.Fatalf("the refused commit consumed a sequence: %d %v", e.Sequence, err)
	}
}
