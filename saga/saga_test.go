package saga_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/saga"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// effects records side effects outside the runtime, by idempotency key:
// a re-run of an attempt a crash interrupted carries the same key.
type effects struct {
	mu    sync.Mutex
	order []string
	keys  map[string]string // key -> what
}

func (f *effects) do(ctx context.Context, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]string{}
	}
	key := loom.IdempotencyKey(ctx)
	if _, seen := f.keys[key]; seen {
		return // the same attempt again: a provider dedupes it by its key
	}
	f.keys[key] = what
	f.order = append(f.order, what)
}

func (f *effects) done() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

type trip struct {
	Who string `json:"who"`
}

// tripFlow books a flight, a hotel and a car; the car fails, so the hotel
// and the flight are cancelled, in that order.
func tripFlow(fx *effects) *loom.Flow {
	// A refusal is a typed failure, so it is durable: replay and recovery
	// serve it from the log (an untyped one would be re-run).
	book := func(what string, fail bool) *loom.Step[trip, string] {
		return loom.NewStep("book-"+what, func(ctx context.Context, in trip) (string, error) {
			if fail {
				return "", loom.Fail("unavailable", map[string]string{"reason": "no " + what + " for " + in.Who})
			}
			fx.do(ctx, "book "+what)
			return what + "-1", nil
		}, loom.ErrorChannel("unavailable", `{"type":"object"}`))
	}
	cancel := func(what string) *loom.Step[saga.Undo[trip, string], bool] {
		return loom.NewStep("cancel-"+what, func(ctx context.Context, u saga.Undo[trip, string]) (bool, error) {
			fx.do(ctx, "cancel "+u.Output)
			return true, nil
		})
	}
	return loom.NewFlow("trip", func(c *loom.Context, in trip) (string, error) {
		s := saga.New(c)
		for _, what := range []string{"flight", "hotel", "car"} {
			if _, err := saga.Run(s, book(what, what == "car"), in, cancel(what)); err != nil {
				return "", s.Compensate(err)
			}
		}
		return "booked", nil
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRuntime(t *testing.T, events store.EventStore, fx *effects) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{tripFlow(fx)}, Durability: loom.StepDurable,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

var wantEffects = []string{"book flight", "book hotel", "cancel hotel-1", "cancel flight-1"}

// TestCompensationsRunInReverseOnce: the car fails, the hotel then the
// flight are cancelled, each once; the execution fails with the cause and
// the steps undone; the log holds the compensation steps in order, and it
// replays.
func TestCompensationsRunInReverseOnce(t *testing.T) {
	fx := &effects{}
	events := memstore.NewEventStore()
	rt := newRuntime(t, events, fx)
	if _, err := rt.Start(testCtx(t), "trip", trip{Who: "ada"}, loom.WithExecutionID("t-1")); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(testCtx(t), "t-1") // a failed execution is also an error
	if res.Status != fold.StatusFailed {
		t.Fatalf("trip: %v, %v; want failed", res.Status, err)
	}
	if got := fx.done(); !slices.Equal(got, wantEffects) {
		t.Fatalf("effects %v, want %v", got, wantEffects)
	}
	log, _ := store.Read(testCtx(t), events, "t-1")
	var steps []string
	for _, e := range log {
		if e.Type == event.StepCompleted {
			steps = append(steps, stepIDOf(t, e))
		}
	}
	want := []string{"book-flight", "book-hotel", saga.CompensationID("book-hotel"), saga.CompensationID("book-flight")}
	if !slices.Equal(steps, want) {
		t.Fatalf("completed steps %v, want %v", steps, want)
	}
	st, _ := rt.LoadState(testCtx(t), "t-1")
	if msg := string(st.Variables.Error); !contains(msg, "unavailable") || !contains(msg, "compensated book-hotel, book-flight") {
		t.Fatalf("the recorded error %s names neither the cause nor the undone steps", msg)
	}
	if rep := rt.CheckReplay(testCtx(t), log); rep.Verdict != loom.ReplayCompatible {
		for _, e := range log {
			t.Logf("%d %s %s", e.Sequence, e.Type, e.Payload)
		}
		t.Fatalf("replay: %+v", rep)
	}
}

// failAfter lets n appends through, then fails every one: the process
// dies at the (n+1)-th write, which reaches nothing durable.
type failAfter struct {
	store.EventStore
	mu   sync.Mutex
	left int
}

var errDead = errors.New("the process died")

func (f *failAfter) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	f.mu.Lock()
	if f.left == 0 {
		f.mu.Unlock()
		return errDead
	}
	f.left--
	f.mu.Unlock()
	return f.EventStore.Append(ctx, id, expected, evs)
}

// TestCrashMatrixNoCompensationTwiceNoneSkipped kills the process at every
// append of the saga's run and recovers it in a fresh runtime: every
// booking and every cancellation happens exactly once (by idempotency
// key), in order, and the execution ends failed as uncrashed.
func TestCrashMatrixNoCompensationTwiceNoneSkipped(t *testing.T) {
	for n := 1; ; n++ {
		fx := &effects{}
		durableLog := memstore.NewEventStore()
		crashing := &failAfter{EventStore: durableLog, left: n}
		rt := newRuntime(t, crashing, fx)
		if _, err := rt.Start(testCtx(t), "trip", trip{Who: "ada"}, loom.WithExecutionID("t")); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		res, _ := rt.WaitForCompletion(testCtx(t), "t")
		rt.Close()
		survived := res.Status.Terminal()
		if !survived {
			// The crash happened: a fresh process recovers from the log.
			rt2 := newRuntime(t, durableLog, fx)
			if _, err := rt2.Recover(testCtx(t)); err != nil {
				t.Fatalf("n=%d: Recover: %v", n, err)
			}
			var err error
			if res, err = rt2.WaitForCompletion(testCtx(t), "t"); !res.Status.Terminal() {
				t.Fatalf("n=%d: after recovery: %v %v", n, res.Status, err)
			}
		}
		if res.Status != fold.StatusFailed {
			t.Fatalf("n=%d: ended %v, want failed", n, res.Status)
		}
		if got := fx.done(); !slices.Equal(got, wantEffects) {
			t.Fatalf("n=%d: effects %v, want %v", n, got, wantEffects)
		}
		if survived {
			if n < 6 {
				t.Fatalf("the run survived a crash after only %d appends: the matrix covered nothing", n)
			}
			return // n past the run's last append: every point was covered
		}
	}
}

// TestBadInputIsRefusedAndNothingRecorded: a nil step or compensation, and
// a Run after Compensate, are refused without a step.
func TestBadInputIsRefusedAndNothingRecorded(t *testing.T) {
	step := loom.NewStep("s", func(ctx context.Context, in int) (int, error) { return in, nil })
	undo := loom.NewStep("u", func(ctx context.Context, in saga.Undo[int, int]) (bool, error) { return true, nil })
	flow := loom.NewFlow("bad", func(c *loom.Context, _ struct{}) (string, error) {
		s := saga.New(c)
		_, e1 := saga.Run[int, int, bool](s, nil, 1, undo)
		_, e2 := saga.Run[int, int, bool](s, step, 1, nil)
		_ = s.Compensate(errors.New("stop"))
		_, e3 := saga.Run(s, step, 1, undo)
		e4 := s.Compensate(errors.New("again"))
		if e1 == nil || e2 == nil || !errors.Is(e3, saga.ErrEnded) || !errors.Is(e4, saga.ErrEnded) {
			return "", fmt.Errorf("accepted: %v %v %v %v", e1, e2, e3, e4)
		}
		return "refused", nil
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	_, _ = rt.Start(testCtx(t), "bad", nil, loom.WithExecutionID("b"))
	if res, err := rt.WaitForCompletion(testCtx(t), "b"); err != nil || string(res.Output) != `"refused"` {
		t.Fatalf("%s %v", res.Output, err)
	}
	st, _ := rt.LoadState(testCtx(t), "b")
	if len(st.Frames) != 0 {
		t.Fatalf("refused calls recorded steps: %v", st.Frames)
	}
}

func stepIDOf(t *testing.T, e event.Envelope) string {
	t.Helper()
	var p struct {
		StepID string `json:"stepId"`
	}
	if err := jsonUnmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.StepID
}
