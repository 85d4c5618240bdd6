package loom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// eventTape collects hook reports, safe for concurrent hooks.
type eventTape struct {
	mu  sync.Mutex
	evs []event.Envelope
}

func (t *eventTape) add(e event.Envelope) {
	t.mu.Lock()
	t.evs = append(t.evs, e)
	t.mu.Unlock()
}

// of returns the reports of one execution, in the order they came.
func (t *eventTape) of(id string) []event.Envelope {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []event.Envelope
	for _, e := range t.evs {
		if e.ExecutionID == id {
			out = append(out, e)
		}
	}
	return out
}

func sameEnvelopes(t *testing.T, what string, got, want []event.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %v, the log holds %d %v", what, len(got), types(got), len(want), types(want))
	}
	for i := range want {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if string(g) != string(w) {
			t.Fatalf("%s: event %d is\n%s\nthe log holds\n%s", what, i, g, w)
		}
	}
}

func TestOnEventAndOnDurableEventReportEveryEventOfTheLogInOrder(t *testing.T) {
	var committed, durable eventTape
	h := newHarnessWith(t, loom.Config{OnEvent: committed.add, OnDurableEvent: durable.add})
	rt := h.open(approvalFlow(h))
	ctx := h.ctx()
	id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		t.Fatal(err)
	}
	rt.Close() // delivers what OnDurableEvent has queued
	log := h.log(id)
	sameEnvelopes(t, "OnEvent", committed.of(id), log)
	sameEnvelopes(t, "OnDurableEvent", durable.of(id), log)
	if n := rt.DroppedDurableEvents(); n != 0 {
		t.Fatalf("%d durable events dropped", n)
	}
}

func TestOnDurableEventNeverReportsAnEventTheLogDoesNotHold(t *testing.T) {
	// Each kill lands on a later write: the start, the step's start, its
	// completion, the park.
	for _, kill := range []int{0, 1, 2, 3} {
		t.Run(fmt.Sprintf("killed after %d events", kill), func(t *testing.T) {
			var committed, durable eventTape
			inner := memstore.NewEventStore()
			fault := crashtest.NewFaultStore(inner)
			fault.KillAfter(kill)
			h := newHarness(t)
			flow := approvalFlow(h)
			rt, err := loom.New(loom.Config{Events: fault, Flows: []*loom.Flow{flow}, Recovery: loom.Recovery{Disabled: true},
				OnEvent: committed.add, OnDurableEvent: durable.add, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			id, err := rt.Start(h.ctx(), "approval", order{Item: "disk", Qty: 1})
			if err == nil {
				<-fault.Killed()
			}
			// Close waits for the drive and delivers what is queued.
			rt.Close()
			if id == "" {
				t.Fatal("no id")
			}
			log, err := store.Read(context.Background(), inner, id)
			if err != nil {
				t.Fatal(err)
			}
			// A batch the store refused is never reported, even the prefix a
			// dying store kept: what is reported is a prefix of the log.
			got := durable.of(id)
			if len(got) > len(log) {
				t.Fatalf("OnDurableEvent reported %d events, the log holds %d", len(got), len(log))
			}
			sameEnvelopes(t, "OnDurableEvent", got, log[:len(got)])
			if got := len(committed.of(id)); got < len(log) {
				t.Fatalf("OnEvent saw %d events, fewer than the %d durable", got, len(log))
			}
		})
	}
}

func TestABlockingOnDurableEventStallsNoJournalAndDropsWhatDoesNotFit(t *testing.T) {
	release := make(chan struct{})
	var durable eventTape
	warnings := syncWriter{w: new(bytes.Buffer)}
	hook := func(e event.Envelope) {
		<-release
		durable.add(e)
	}
	h := newHarnessWith(t, loom.Config{OnDurableEvent: hook, EventHookBuffer: 3,
		Logger: slog.New(slog.NewTextHandler(&warnings, nil))})
	rt := h.open(approvalFlow(h))
	ctx := h.ctx()
	var ids []string
	for i := range 4 {
		id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(ctx, id); err != nil {
			t.Fatalf("the flow did not park while the hook blocked: %v", err)
		}
		ids = append(ids, id)
	}
	if rt.DroppedDurableEvents() == 0 {
		t.Fatal("nothing dropped: the queue of 3 held 16 events")
	}
	if !strings.Contains(warnings.String(), "OnDurableEvent is behind") {
		t.Fatalf("no warning about the drops: %s", warnings.String())
	}
	close(release)
	rt.Close()
	delivered := 0
	for _, id := range ids {
		log := h.log(id)
		got := durable.of(id)
		delivered += len(got)
		// What was delivered is in the log, once, in the log's order.
		last := int64(-1)
		for _, e := range got {
			if e.Sequence <= last || e.Sequence >= int64(len(log)) || e.ID != log[e.Sequence].ID {
				t.Fatalf("delivered %s #%d out of order or not as logged", e.Type, e.Sequence)
			}
			last = e.Sequence
		}
	}
	if int64(delivered)+rt.DroppedDurableEvents() != 16 {
		t.Fatalf("delivered %d + dropped %d != the 16 durable events", delivered, rt.DroppedDurableEvents())
	}
}

func TestABlockingOnEventHoldsOnlyItsOwnCommitterNotTheDurableTail(t *testing.T) {
	block := make(chan struct{})
	var blocked sync.Once
	entered := make(chan struct{})
	onEvent := func(e event.Envelope) {
		if e.ExecutionID == "slow" && e.Type == event.StepStarted {
			blocked.Do(func() { close(entered) })
			<-block
		}
	}
	h := newHarnessWith(t, loom.Config{OnEvent: onEvent})
	rt := h.open(approvalFlow(h))
	ctx := h.ctx()
	if _, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: 1}, loom.WithExecutionID("slow")); err != nil {
		t.Fatal(err)
	}
	<-entered
	// The committed STEP_STARTED reaches the log while its hook blocks.
	waitUntil(t, h, "slow", func(s fold.State) bool { return s.Frames["price"].Status == fold.FrameRunning })
	// Another execution runs on.
	id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	close(block)
	if _, err := rt.WaitForSuspend(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
}

func TestPanickingHooksBreakNeitherTheJournalNorTheFlow(t *testing.T) {
	warnings := syncWriter{w: new(bytes.Buffer)}
	boom := func(e event.Envelope) { panic("hook bug at " + e.Type) }
	h := newHarnessWith(t, loom.Config{OnEvent: boom, OnDurableEvent: boom,
		Logger: slog.New(slog.NewTextHandler(&warnings, nil))})
	rt := h.open(approvalFlow(h))
	ctx := h.ctx()
	id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	if got := types(h.log(id)); !slices.Equal(got, []string{event.ExecutionStarted, event.StepStarted, event.StepCompleted, event.ExecutionSuspended}) {
		t.Fatalf("log = %v", got)
	}
	for _, hook := range []string{"OnEvent panicked", "OnDurableEvent panicked"} {
		if !strings.Contains(warnings.String(), hook) {
			t.Fatalf("no %q warning: %s", hook, warnings.String())
		}
	}
}

func TestEventHookConfigRefusals(t *testing.T) {
	events := memstore.NewEventStore()
	for _, c := range []struct {
		name string
		cfg  loom.Config
	}{
		{"negative buffer", loom.Config{Events: events, OnDurableEvent: func(event.Envelope) {}, EventHookBuffer: -1}},
		{"buffer without a hook", loom.Config{Events: events, EventHookBuffer: 8}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loom.New(c.cfg)
			var ce *loom.ConfigError
			if !errors.As(err, &ce) || ce.Field != "EventHookBuffer" {
				t.Fatalf("err = %v, want a ConfigError on EventHookBuffer", err)
			}
		})
	}
}

// tapeObserver records what an Observer hears, and carries a trace
// through context values as a real tracer would.
type tapeObserver struct {
	mu    sync.Mutex
	lines []string
}

type traceKey struct{}

func (o *tapeObserver) note(format string, args ...any) {
	o.mu.Lock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func (o *tapeObserver) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.lines)
}

func (o *tapeObserver) Operation(ctx context.Context, op loom.Operation) (context.Context, func(error)) {
	return ctx, func(err error) { o.note("op %s %s err=%v", op.Name, op.FlowID, err != nil) }
}

func (o *tapeObserver) Drive(ctx context.Context, d loom.DriveInfo) (context.Context, func(loom.DriveEnd)) {
	parent, _ := d.Operation.Value(traceKey{}).(string)
	if parent == "" {
		parent = d.Trace()["traceparent"]
	}
	o.note("drive %s parent=%s", d.FlowID, parent)
	return context.WithValue(ctx, traceKey{}, parent), func(end loom.DriveEnd) { o.note("drive end %s", end.Status) }
}

func (o *tapeObserver) StepAttempt(ctx context.Context, s loom.StepAttempt) (context.Context, func(error)) {
	parent, _ := ctx.Value(traceKey{}).(string)
	o.note("attempt %s#%d parent=%s", s.StepID, s.Attempt, parent)
	return ctx, func(err error) { o.note("attempt %s#%d err=%v", s.StepID, s.Attempt, err != nil) }
}

func (o *tapeObserver) Append(ctx context.Context, id string, events int) func(error) {
	return func(err error) {
		if events < 1 {
			o.note("empty append")
		}
	}
}

func (o *tapeObserver) TimerFired(ctx context.Context, key string, lag time.Duration) {
	o.note("timer %s lag=%s", key[:strings.Index(key, ":")], lag)
}

func (o *tapeObserver) LeaseTakenOver(ctx context.Context, id, from string) {
	o.note("takeover from %s", from)
}

func (o *tapeObserver) TraceContext(ctx context.Context) map[string]string {
	if p, ok := ctx.Value(traceKey{}).(string); ok {
		return map[string]string{"traceparent": p}
	}
	return nil
}

func TestAnObserverSeesOperationsDrivesAndAttemptsAndTheTraceCrossesProcesses(t *testing.T) {
	flaky := 0
	price := loom.NewStep("price", func(ctx context.Context, o order) (int, error) {
		if flaky++; flaky == 1 {
			return 0, errors.New("transient")
		}
		return o.Qty * 10, nil
	}, loom.WithRetry(noWait(2)))
	flow := loom.NewFlow("approval", func(ctx *loom.Context, o order) (int, error) {
		total, err := loom.Run(ctx, price, o)
		if err != nil {
			return 0, err
		}
		if _, err := loom.Suspend[bool](ctx, "approve"); err != nil {
			return 0, err
		}
		return total, nil
	})
	obs := &tapeObserver{}
	h := newHarnessWith(t, loom.Config{Observer: obs, StickyParks: -1})
	rt := h.open(flow)
	ctx := context.WithValue(h.ctx(), traceKey{}, "00-trace-a-01")
	id, err := rt.Start(ctx, "approval", order{Item: "disk", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	started := h.log(id)[0]
	if got := string(started.Metadata["trace"]); got != `{"traceparent":"00-trace-a-01"}` {
		t.Fatalf("EXECUTION_STARTED records trace %s", got)
	}
	rt.Close()
	// Another process resumes it, its caller carrying no trace: the drive
	// continues the recorded one.
	other := h.open(flow)
	if err := other.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.WaitForCompletion(h.ctx(), id); err != nil {
		t.Fatal(err)
	}
	other.Close()
	// An operation ends once its commit is durable and its drive launched,
	// so where its line falls among the drive's is the scheduler's: check
	// the operations apart.
	got := obs.seen()
	ops := slices.DeleteFunc(slices.Clone(got), func(l string) bool { return !strings.HasPrefix(l, "op ") })
	if want := []string{"op start approval err=false", "op resume  err=false"}; !slices.Equal(ops, want) {
		t.Fatalf("operations %q, want %q", ops, want)
	}
	rest := slices.DeleteFunc(slices.Clone(got), func(l string) bool { return strings.HasPrefix(l, "op ") })
	want := []string{
		"drive approval parent=00-trace-a-01",
		"attempt price#1 parent=00-trace-a-01", "attempt price#1 err=true",
		"attempt price#2 parent=00-trace-a-01", "attempt price#2 err=false",
		"drive end suspended",
		"drive approval parent=00-trace-a-01",
		"drive end completed",
	}
	if !slices.Equal(rest, want) {
		t.Fatalf("observer heard\n%s\nwant\n%s", strings.Join(rest, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range h.log(id)[1:] {
		if _, ok := e.Metadata["trace"]; ok && e.Type != event.ExecutionResumed {
			t.Fatalf("%s #%d carries a trace: only an operation's first event does", e.Type, e.Sequence)
		}
	}
}

func TestUnwiredHooksAndAnObserverWithoutTraceLeaveTheLogByteIdentical(t *testing.T) {
	run := func(cfg loom.Config) []event.Envelope {
		clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
		n := 0
		cfg.Clock = clock
		cfg.NewID = func() string { n++; return fmt.Sprintf("id-%d", n) }
		h := newHarnessWith(t, cfg)
		rt := h.open(approvalFlow(h))
		id, err := rt.Start(h.ctx(), "approval", order{Item: "disk", Qty: 3})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(h.ctx(), id); err != nil {
			t.Fatal(err)
		}
		rt.Close()
		return h.log(id)
	}
	plain := run(loom.Config{})
	hooked := run(loom.Config{OnEvent: func(event.Envelope) {}, OnDurableEvent: func(event.Envelope) {}, Observer: &tapeObserver{}})
	sameEnvelopes(t, "with hooks and an observer", hooked, plain)
}
