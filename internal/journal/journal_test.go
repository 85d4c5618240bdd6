package journal

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
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

func TestJournalBatchesMustContinueTheDurableLog(t *testing.T) {
	batch := func(seqs ...int64) []event.Envelope {
		out := make([]event.Envelope, len(seqs))
		for i, s := range seqs {
			out[i] = event.Envelope{Sequence: s}
		}
		return out
	}
	cases := []struct {
		name  string
		batch []event.Envelope
		from  int64
		ok    bool
	}{
		{"continues", batch(3, 4, 5), 3, true},
		{"starts late", batch(4, 5), 3, false},
		{"starts early", batch(2, 3), 3, false},
		{"has a gap", batch(3, 5), 3, false},
		{"repeats", batch(3, 3), 3, false},
	}
	for _, c := range cases {
		err := contiguous(c.batch, c.from)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrNotContiguous) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestJournalWithOptionsStampsFencesAndChecksSequences(t *testing.T) {
	mem := memstore.NewEventStore()
	token, err := mem.AcquireFence(context.Background(), "ex")
	if err != nil {
		t.Fatal(err)
	}
	j := New(mem, "ex", "wf", fold.Initial(), WithFence(mem, token), WithMeta(map[string]json.RawMessage{"simulate": json.RawMessage("true")}))
	e, err := j.Commit(event.ExecutionStarted, map[string]any{"input": 1}, nil)
	if err != nil || string(e.Metadata["simulate"]) != "true" || e.ID != "ex:0" {
		t.Fatalf("%+v %v", e, err)
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A newer driver takes the fence: this journal's next append is refused.
	if _, err := mem.AcquireFence(context.Background(), "ex"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Commit(event.StepStarted, map[string]any{"stepId": "s"}, nil); err != nil {
		t.Fatal(err)
	}
	var fenced *store.FencedError
	if err := j.Barrier(context.Background()); !errors.As(err, &fenced) {
		t.Fatalf("barrier after a take-over = %v, want *store.FencedError", err)
	}
	if evs, _ := store.Read(context.Background(), mem, "ex"); len(evs) != 1 {
		t.Fatalf("the fenced journal wrote %d events", len(evs)-1)
	}
}

// batchRecorder records the batches the durable tail hands the store, and
// closes got[seq] when a batch holding seq arrives.
type batchRecorder struct {
	store.EventStore
	mu      sync.Mutex
	batches [][]int64
	got     map[int64]chan struct{}
}

func (b *batchRecorder) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	err := b.EventStore.Append(ctx, id, expected, evs)
	b.mu.Lock()
	defer b.mu.Unlock()
	seqs := make([]int64, len(evs))
	for i, e := range evs {
		seqs[i] = e.Sequence
		if c, ok := b.got[e.Sequence]; ok {
			close(c)
			delete(b.got, e.Sequence)
		}
	}
	b.batches = append(b.batches, seqs)
	return err
}

func TestJournalCommitAllIsOneAppend(t *testing.T) {
	rec := &batchRecorder{EventStore: memstore.NewEventStore(), got: map[int64]chan struct{}{1: make(chan struct{})}}
	arrived := rec.got[1]
	// The hook of the group's first event waits until the store holds it:
	// had that event been queued alone, the tail would write it alone.
	hook := func(e event.Envelope) {
		if e.Sequence == 1 {
			<-arrived
		}
	}
	j := New(rec, "ex", "wf", fold.Initial(), WithHooks(hook, nil, nil))
	if _, err := j.Commit(event.ExecutionStarted, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := j.CommitAll([]Event{
		{Type: event.TimerFired, Payload: map[string]int64{"wakeAt": 5}},
		{Type: event.ExecutionResumed, Payload: map[string]any{"eventType": event.TimerFired}},
	})
	if err != nil || len(evs) != 2 || evs[0].Sequence != 1 || evs[1].Sequence != 2 {
		t.Fatalf("CommitAll = %v, %v", evs, err)
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := [][]int64{{0}, {1, 2}}; !reflect.DeepEqual(rec.batches, want) {
		t.Fatalf("batches %v, want %v", rec.batches, want)
	}
}

func TestJournalCommitAllRefusesAGroupWithAnInvalidEventWhole(t *testing.T) {
	mem := memstore.NewEventStore()
	j := testJournal(mem)
	_, err := j.CommitAll([]Event{{Type: event.ExecutionStarted}, {Type: "bad\x00type"}})
	if !errors.Is(err, event.ErrInvalidEnvelope) {
		t.Fatalf("err = %v", err)
	}
	if st := j.State(); st.Sequence != -1 {
		t.Fatalf("the refused group folded up to %d", st.Sequence)
	}
	e, err := j.Commit(event.ExecutionStarted, nil, nil)
	if err != nil || e.Sequence != 0 {
		t.Fatalf("the refused group consumed a sequence: %d %v", e.Sequence, err)
	}
	if err := j.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs, _ := store.Read(context.Background(), mem, "ex"); len(evs) != 1 {
		t.Fatalf("durable events: %d, want 1", len(evs))
	}
}
