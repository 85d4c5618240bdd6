package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// storyFlow parks three times and does a bit of everything in between; it
// counts how often its body is entered.
func storyFlow(entered *atomic.Int64) *loom.Flow {
	return loom.NewFlow("story", func(ctx *loom.Context, n int) (string, error) {
		entered.Add(1)
		out := ""
		for i := range 3 {
			v, err := ctx.Run(fmt.Sprintf("work#%d", i), func(context.Context) (any, error) { return n + i, nil })
			if err != nil {
				return "", err
			}
			pick, err := loom.Decide(ctx, fmt.Sprintf("pick#%d", i), func() (int, error) { return i * 10, nil })
			if err != nil {
				return "", err
			}
			if err := ctx.Emit("progress", map[string]any{"i": i, "v": json.RawMessage(v)}); err != nil {
				return "", err
			}
			answer, err := loom.Suspend[string](ctx, "next", loom.Timeout(time.Hour))
			if err != nil {
				return "", err
			}
			out += fmt.Sprintf("%s/%d/%s;", v, pick, answer)
		}
		return out, nil
	})
}

func runStory(t *testing.T, cfg loom.Config) (*harness, string, int64) {
	t.Helper()
	var entered atomic.Int64
	cfg.Clock = &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	h := newHarnessWith(t, cfg, storyFlow(&entered))
	id, err := h.rt.Start(h.ctx(), "story", 5, loom.WithExecutionID("story-1"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		resume(t, h, id, "next", fmt.Sprintf(`"a%d"`, i))
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `"5/0/a0;6/10/a1;7/20/a2;"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	return h, id, entered.Load()
}

func TestStickyParkIsAnsweredInPlaceWithoutReplay(t *testing.T) {
	_, _, sticky := runStory(t, loom.Config{})
	_, _, replayed := runStory(t, replaying)
	if sticky != 1 || replayed != 4 {
		t.Fatalf("body entered %d times with sticky parks, %d replaying; want 1 and 4", sticky, replayed)
	}
}

// The in-place path and the replay path are observably the same: the logs
// match event for event, bar ids.
func TestStickyAndReplayWriteTheSameLog(t *testing.T) {
	hs, id, _ := runStory(t, loom.Config{})
	hr, _, _ := runStory(t, replaying)
	a, b := hs.log(id), hr.log(id)
	if len(a) != len(b) {
		t.Fatalf("logs differ in length: %v vs %v", types(a), types(b))
	}
	for i := range a {
		a[i].ID, b[i].ID = "", ""
		ea, _ := event.Encode(a[i])
		eb, _ := event.Encode(b[i])
		if string(ea) != string(eb) {
			t.Fatalf("event %d differs:\n sticky %s\n replay %s", i, ea, eb)
		}
	}
	sa, _ := fold.Encode(fold.Fold(a))
	sb, _ := fold.Encode(fold.Fold(b))
	if string(sa) != string(sb) {
		t.Fatal("folded states differ")
	}
}

func TestStickyParksAreBoundedAndAnEvictedParkReplays(t *testing.T) {
	var entered atomic.Int64
	h := newHarnessWith(t, loom.Config{StickyParks: 1}, storyFlow(&entered))
	first, _ := h.rt.Start(h.ctx(), "story", 1)
	if _, err := h.rt.WaitForSuspend(h.ctx(), first); err != nil {
		t.Fatal(err)
	}
	second, _ := h.rt.Start(h.ctx(), "story", 2) // evicts the first park
	if _, err := h.rt.WaitForSuspend(h.ctx(), second); err != nil {
		t.Fatal(err)
	}
	resume(t, h, second, "next", `"y"`) // in place
	if _, err := h.rt.WaitForSuspend(h.ctx(), second); err != nil {
		t.Fatal(err)
	}
	resume(t, h, first, "next", `"x"`) // evicted: replays
	for _, id := range []string{first, second} {
		if st, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil || len(st.Variables.ResumePayloads) != 1 {
			t.Fatalf("%s: %+v %v", id, st.Variables.ResumePayloads, err)
		}
	}
	// Two starts, one replay of the evicted park.
	if n := entered.Load(); n != 3 {
		t.Fatalf("body entered %d times, want 3", n)
	}
}

func TestStickyParkRefusalLeavesItParkedInPlace(t *testing.T) {
	var entered atomic.Int64
	flow := loom.NewFlow("gated", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		entered.Add(1)
		return ctx.Suspend("approve")
	}, loom.WithResumeSchema("approve", approveSchema))
	h := newHarness(t, flow)
	id, _ := h.rt.Start(h.ctx(), "gated", nil)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	before := len(h.log(id))
	var ve *loom.ResumePayloadValidationError
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":1}`)}); !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	refused(t, h, id, before, h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "other"}), loom.RefusedGateMismatch)
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(h.ctx(), id)
	if err != nil || string(res.Output) != `{"approved":true,"by":"unknown"}` || entered.Load() != 1 {
		t.Fatalf("%s %v, entered %d", res.Output, err, entered.Load())
	}
}

func TestStickyParkNoticesALogMovedByAnotherProcess(t *testing.T) {
	var entered atomic.Int64
	h := newHarness(t, storyFlow(&entered))
	id, _ := h.rt.Start(h.ctx(), "story", 1)
	if _, err := h.rt.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	other := h.open(storyFlow(&entered)) // another process over the same store
	if err := other.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "next", Payload: json.RawMessage(`"b"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.WaitForSuspend(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	// The first process's parked flow is stale: its next resume must not
	// write on top of the other's log.
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "next", Payload: json.RawMessage(`"c"`)}); err == nil {
		st, _ := other.LoadState(h.ctx(), id)
		if len(st.Variables.ResumePayloads) > 2 {
			t.Fatalf("both answers were recorded on one gate: %+v", st.Variables.ResumePayloads)
		}
	}
	log := h.log(id)
	if st := fold.Fold(log); st.Sequence != int64(len(log)-1) {
		t.Fatalf("log has a gap or a duplicate: %d events, sequence %d", len(log), st.Sequence)
	}
}

// heldStartStore holds the append of an execution's first event until
// released, and says when one is held: a start caught between its claim
// and its drive. It is no store.Fencer, so every append comes through
// Append.
type heldStartStore struct {
	store.EventStore
	held, release chan struct{}
}

func (s *heldStartStore) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return s.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}

func (s *heldStartStore) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if expected == 0 {
		close(s.held)
		<-s.release
	}
	return s.EventStore.Append(ctx, id, expected, evs)
}

// A resume that arrives while the start is still making its first event
// durable never hangs on the claim the start's sticky park keeps: it is
// refused as not parked yet (retry) or answers the park in place, and the
// retried resume answers it.
func TestResumeDuringTheStartDoesNotHang(t *testing.T) {
	flow := loom.NewFlow("quick", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "go")
	})
	events := &heldStartStore{EventStore: memstore.NewEventStore(), held: make(chan struct{}), release: make(chan struct{})}
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() {
		_, err := rt.Start(ctx, "quick", struct{}{}, loom.WithExecutionID("q-1"))
		started <- err
	}()
	<-events.held
	answer := loom.ResumeEvent{EventType: "go", Payload: json.RawMessage(`"yes"`)}
	resumed := make(chan error, 1)
	go func() { resumed <- rt.Resume(ctx, "q-1", answer) }()
	time.Sleep(20 * time.Millisecond) // lets the resume find the claim of the held start (pacing, not an assertion)
	close(events.release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	err = <-resumed
	var refused *loom.ResumeRefusedError
	if errors.As(err, &refused) && refused.Reason == loom.RefusedNotSuspended {
		if _, err := rt.WaitForSuspend(ctx, "q-1"); err != nil {
			t.Fatal(err)
		}
		err = rt.Resume(ctx, "q-1", answer)
	}
	if err != nil {
		t.Fatalf("resume during the start: %v", err)
	}
	res, err := rt.WaitForCompletion(ctx, "q-1")
	if err != nil || string(res.Output) != `"yes"` {
		t.Fatalf("%s %v", res.Output, err)
	}
}
