package loom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// harness is a runtime over memory stores with a counting step.
type harness struct {
	t      *testing.T
	events *memstore.EventStore
	snaps  *memstore.SnapshotStore
	timers *memstore.TimerStore
	bare   bool // no timer store: for the tests of what is missing
	// autoRecover, when set, leaves automatic recovery on.
	autoRecover *bool
	rt          *loom.Runtime
	cfg         loom.Config
	calls       atomic.Int64
}

// fakeClock is an injected clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// waitUntil follows the durable log until cond holds for the folded state.
func waitUntil(t *testing.T, h *harness, id string, cond func(fold.State) bool) {
	t.Helper()
	sub, err := h.events.Subscribe(h.ctx(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	f := fold.NewFolder(fold.Initial())
	for e := range sub.Events() {
		f.Apply(e)
		if cond(*f.Peek()) {
			return
		}
	}
	t.Fatalf("condition never held: %v", sub.Err())
}

// replaying disables sticky parks, so every resume replays from the log:
// the tests of replay itself use it.
var replaying = loom.Config{StickyParks: -1}

func newHarness(t *testing.T, flows ...*loom.Flow) *harness {
	return newHarnessWith(t, loom.Config{}, flows...)
}

// newHarnessWith uses cfg's hooks and options over fresh memory stores.
func newHarnessWith(t *testing.T, cfg loom.Config, flows ...*loom.Flow) *harness {
	t.Helper()
	h := &harness{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), timers: memstore.NewTimerStore(), cfg: cfg}
	h.rt = h.open(flows...)
	return h
}

// newBareHarness is newHarness without a timer store.
func newBareHarness(t *testing.T, flows ...*loom.Flow) *harness {
	t.Helper()
	h := &harness{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), bare: true}
	h.rt = h.open(flows...)
	return h
}

func (h *harness) open(flows ...*loom.Flow) *loom.Runtime {
	cfg := h.cfg
	cfg.Events, cfg.Snapshots, cfg.Flows = h.events, h.snaps, flows
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler) // the runtime's default is slog.Default()
	}
	if h.autoRecover == nil {
		// Tests call Recover themselves, so its count is theirs to assert.
		cfg.Recovery.Disabled = true
	}
	if cfg.Timers == nil && !h.bare {
		// Timed waits need a timer store; the harness's is fired by hand.
		cfg.Timers = h.timers
		if cfg.TimerPoll == 0 {
			cfg.TimerPoll = -1
		}
	}
	rt, err := loom.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { rt.Close() })
	return rt
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) log(id string) []event.Envelope {
	evs, err := store.Read(context.Background(), h.events, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func types(evs []event.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

type order struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

func approvalFlow(h *harness) *loom.Flow {
	price := loom.NewStep("price", func(ctx context.Context, o order) (int, error) {
		h.calls.Add(1)
		return o.Qty * 10, nil
	})
	return loom.NewFlow("approval", func(ctx *loom.Context, o order) (map[string]any, error) {
		total, err := loom.Run(ctx, price, o)
		if err != nil {
			return nil, err
		}
		ok, err := loom.Suspend[bool](ctx, "approve")
		if err != nil {
			return nil, err
		}
		return map[string]any{"total": total, "approved": ok}, nil
	})
}

func TestStartSuspendResumeComplete(t *testing.T) {
	h := &harness{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore()}
	h.rt = h.open(approvalFlow(h))
	ctx := h.ctx()
	id, err := h.rt.Start(ctx, "approval", order{Item: "disk", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.rt.WaitForSuspend(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Variables.SuspendedOn.On != "approve" {
		t.Fatalf("parked on %+v", st.Variables.SuspendedOn)
	}
	if err := h.rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	res, err := h.rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != `{"approved":true,"total":30}` {
		t.Fatalf("output = %s", res.Output)
	}
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("the step ran %d times, want once", n)
	}
	want := []string{event.ExecutionStarted, event.StepStarted, event.StepCompleted, event.ExecutionSuspended,
		event.ExecutionResumed, event.ExecutionCompleted}
	if got := types(h.log(id)); len(got) != len(want) {
		t.Fatalf("log = %v", got)
	}
	if again := fold.Fold(h.log(id)); again.Status != fold.StatusCompleted {
		t.Fatalf("refold status %s", again.Status)
	}
}

func TestStartDuplicateIDRefusedBeforeAnyEffect(t *testing.T) {
	h := &harness{t: t, events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore()}
	h.rt = h.open(approvalFlow(h))
	ctx := h.ctx()
	if _, err := h.rt.Start(ctx, "approval", order{Qty: 1}, loom.WithExecutionID("inc-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.WaitForSuspend(ctx, "inc-1"); err != nil {
		t.Fatal(err)
	}
	before := len(h.log("inc-1"))
	// A second runtime over the same store: the duplicate is detected by the
	// store's conditional append, not by process memory.
	other := h.open(approvalFlow(h))
	_, err := other.Start(ctx, "approval", order{Qty: 1}, loom.WithExecutionID("inc-1"))
	if !errors.Is(err, loom.ErrExecutionExists) {
		t.Fatalf("err = %v", err)
	}
	if n := h.calls.Load(); n != 1 {
		t.Fatalf("the step ran %d times", n)
	}
	if after := len(h.log("inc-1")); after != before {
		t.Fatalf("log grew from %d to %d", before, after)
	}
}

func newBranchRegistry() *memstore.BranchRegistry { return memstore.NewBranchRegistry() }

// syncWriter serializes writes from the runtime's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
