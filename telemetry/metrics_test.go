package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/telemetry"
)

func TestMetricsCountWhatNExecutionsDid(t *testing.T) {
	const n = 5
	r := newRig(t, telemetry.Options{})
	rt := r.runtime(orderFlow(false))
	for i := range n {
		id, err := rt.Start(context.Background(), "order", order{Item: "disk", Qty: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForCompletion(r.ctx(), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Close(); err != nil { // delivers the durable events queued
		t.Fatal(err)
	}
	rm := r.metrics()
	flow := attribute.String("loom.flow.id", "order")
	for _, c := range []struct {
		name string
		want int64
	}{
		{"loom.executions.started", n},
		{"loom.executions.completed", n},
		{"loom.executions.failed", 0},
		{"loom.step.retries", n},
	} {
		if got := intSum(t, rm, c.name, flow); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	// Each execution: price fails once, then succeeds; ship succeeds.
	kind := attribute.String("loom.step.kind", "step")
	ok, failed := attribute.String("loom.outcome", "ok"), attribute.String("loom.outcome", "error")
	if got := intSum(t, rm, "loom.step.attempts", kind, ok); got != 2*n {
		t.Errorf("ok attempts = %d, want %d", got, 2*n)
	}
	if got := intSum(t, rm, "loom.step.attempts", kind, failed); got != n {
		t.Errorf("failed attempts = %d, want %d", got, n)
	}
	if got := histCount(t, rm, "loom.step.duration"); got != 3*n {
		t.Errorf("step durations recorded %d, want %d", got, 3*n)
	}
	if got := intSum(t, rm, "loom.drives", attribute.String("loom.outcome", "completed")); got != n {
		t.Errorf("completed drives = %d, want %d", got, n)
	}
	if got := histCount(t, rm, "loom.journal.append.events", ok); got == 0 {
		t.Error("no append batch measured")
	}
	if got, want := histCount(t, rm, "loom.journal.append.duration"), histCount(t, rm, "loom.journal.append.events"); got != want {
		t.Errorf("append durations %d, batch sizes %d", got, want)
	}
}

func TestParkedCountsParksLessResumesAndCancellationsOfParkedExecutions(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	rt := r.runtime(orderFlow(true))
	var ids []string
	for i := range 3 {
		id, err := rt.Start(context.Background(), "order", order{Item: "disk", Qty: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSuspend(r.ctx(), id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rt.Resume(r.ctx(), ids[0], loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage("true")}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(r.ctx(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := rt.Cancel(r.ctx(), ids[1], "no longer needed"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	rm := r.metrics()
	for _, c := range []struct {
		name string
		want int64
	}{
		{"loom.executions.parked", 1},
		{"loom.executions.suspended", 3},
		{"loom.executions.resumed", 1},
		{"loom.executions.cancelled", 1},
		{"loom.executions.completed", 1},
	} {
		if got := intSum(t, rm, c.name); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	if got := intSum(t, rm, "loom.drives", attribute.String("loom.outcome", "suspended")); got != 3 {
		t.Errorf("suspended drives = %d, want 3", got)
	}
}

func TestObservedQueuesAndStatusesAreGauges(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	if _, err := r.tel.ObserveQueue("emails", func(context.Context) (store.QueueDepth, error) {
		return store.QueueDepth{Ready: 4, Claimed: 2, Done: 9}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tel.ObserveQueue("broken", func(context.Context) (store.QueueDepth, error) {
		return store.QueueDepth{}, errors.New("store down")
	}); err != nil {
		t.Fatal(err)
	}
	reg, err := r.tel.ObserveStatuses(func(context.Context) (map[string]int64, error) {
		return map[string]int64{"running": 3, "suspended": 7}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rm := r.metrics()
	queue := attribute.String("loom.queue", "emails")
	for state, want := range map[string]int64{"ready": 4, "claimed": 2, "done": 9} { //loom:order-independent each checked alone
		if got := intSum(t, rm, "loom.queue.depth", queue, attribute.String("loom.queue.state", state)); got != want {
			t.Errorf("queue depth %s = %d, want %d", state, got, want)
		}
	}
	if got := intSum(t, rm, "loom.queue.depth", attribute.String("loom.queue", "broken")); got != 0 {
		t.Errorf("a failing depth reported %d", got)
	}
	if got := intSum(t, rm, "loom.executions.by_status", attribute.String("loom.status", "suspended")); got != 7 {
		t.Errorf("suspended = %d, want 7", got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := intSum(t, r.metrics(), "loom.queue.depth", queue, attribute.String("loom.queue.state", "ready")); got != 4 {
		t.Errorf("queue depth after unregistering statuses = %d", got)
	}
}

func TestWireChainsTheHookAlreadySetAndCountsEvenWhenItPanics(t *testing.T) {
	r := newRig(t, telemetry.Options{})
	var seen []string
	cfg := loom.Config{OnDurableEvent: func(e event.Envelope) {
		seen = append(seen, e.Type)
		if e.Type == event.ExecutionCompleted {
			panic("app hook bug")
		}
	}}
	r.tel.Wire(&cfg)
	if cfg.Observer != r.tel {
		t.Fatal("Wire did not set the Observer")
	}
	cfg.OnDurableEvent(event.Envelope{Type: event.ExecutionStarted, WorkflowID: "f"})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the app hook's panic was swallowed: the kernel should see and log it")
			}
		}()
		cfg.OnDurableEvent(event.Envelope{Type: event.ExecutionCompleted, WorkflowID: "f"})
	}()
	if len(seen) != 2 {
		t.Fatalf("the app hook saw %v", seen)
	}
	rm := r.metrics()
	if intSum(t, rm, "loom.executions.started") != 1 || intSum(t, rm, "loom.executions.completed") != 1 {
		t.Fatal("Telemetry's hook did not count both events after the app's")
	}
}
