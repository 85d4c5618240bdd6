package crashtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The kit must be able to fail: these tests point Check at a deliberately
// broken recovery and assert that it reports the broken property.

// rewriting is an event store whose reads (ReadFrom, ReadRange) pass every
// event through edit; appends and subscriptions are untouched. It stands
// for a store — or a runtime — that loses or garbles recorded outcomes.
type rewriting struct {
	store.EventStore
	edit func(event.Envelope) event.Envelope
}

func (r rewriting) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	evs, err := r.EventStore.ReadFrom(ctx, id, from)
	for i := range evs {
		evs[i] = r.edit(evs[i])
	}
	return evs, err
}

func (r rewriting) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	evs, err := r.EventStore.(store.RangeReader).ReadRange(ctx, id, from, to)
	for i := range evs {
		evs[i] = r.edit(evs[i])
	}
	return evs, err
}

func (r rewriting) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	return r.EventStore.(store.Subscriber).Subscribe(ctx, id, from)
}

// breakRecovery makes the recovering runtime read through edit and without
// snapshots (which would otherwise serve the outcomes edit hides).
func breakRecovery(edit func(event.Envelope) event.Envelope) func(crashtest.Stores) crashtest.Stores {
	return func(s crashtest.Stores) crashtest.Stores {
		return crashtest.Stores{Events: rewriting{EventStore: s.Events, edit: edit}}
	}
}

func memStores() crashtest.Stores {
	return crashtest.Stores{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore()}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// forgetCompletions turns every STEP_COMPLETED into an inert event of an
// unknown type, keeping its sequence: replay then re-runs completed steps.
func forgetCompletions(e event.Envelope) event.Envelope {
	if e.Type == event.StepCompleted {
		e.Type = "crashtest.forgotten"
	}
	return e
}

func TestCheckReportsARecoveryThatRerunsCompletedSteps(t *testing.T) {
	for _, d := range crashtest.Durabilities {
		t.Run(crashtest.DurabilityName(d), func(t *testing.T) {
			ctx := testContext(t)
			ref, err := crashtest.RunReference(ctx, memStores(), crashtest.Order, d)
			if err != nil {
				t.Fatal(err)
			}
			// Event 2 is fetch's STEP_COMPLETED: from KillAfter(3) on, at
			// least one completion is durable before the crash. At
			// KillAfter(ref.Events) nothing crashes, so nothing re-runs.
			for n := 3; n < ref.Events; n++ {
				c := crashtest.Case{Durability: d, KillAfter: n, Recovery: breakRecovery(forgetCompletions)}
				err := crashtest.Check(ctx, memStores(), ref, c)
				if !crashtest.Violated(err, crashtest.PropNoRerun) {
					t.Errorf("%s: a recovery that re-runs completed steps was not reported as %s; Check said: %v",
						c.Name(), crashtest.PropNoRerun, err)
				}
			}
			// The same cases with an honest recovery hold.
			c := crashtest.Case{Durability: d, KillAfter: 3}
			if err := crashtest.Check(ctx, memStores(), ref, c); err != nil {
				t.Fatalf("%s with an honest recovery: %v", c.Name(), err)
			}
		})
	}
}

func TestCheckReportsARecoveryThatServesAWrongOutput(t *testing.T) {
	// fetch's recorded output is garbled on the way back: replay serves a
	// value the step never returned, and everything after it drifts.
	garble := func(e event.Envelope) event.Envelope {
		if e.Type == event.StepCompleted && string(e.Payload) != "" {
			var p map[string]json.RawMessage
			if json.Unmarshal(e.Payload, &p) == nil && string(p["stepId"]) == `"fetch"` {
				e.Payload = json.RawMessage(`{"stepId":"fetch","output":1}`)
			}
		}
		return e
	}
	ctx := testContext(t)
	ref, err := crashtest.RunReference(ctx, memStores(), crashtest.Order, loom.StepDurable)
	if err != nil {
		t.Fatal(err)
	}
	c := crashtest.Case{Durability: loom.StepDurable, KillAfter: 3, Recovery: breakRecovery(garble)}
	err = crashtest.Check(ctx, memStores(), ref, c)
	if !crashtest.Violated(err, crashtest.PropState) {
		t.Fatalf("a replay serving a wrong output was not reported as %s; Check said: %v", crashtest.PropState, err)
	}
	if crashtest.Violated(err, crashtest.PropNoRerun) {
		t.Fatalf("no step re-ran, yet Check reported %s: %v", crashtest.PropNoRerun, err)
	}
}

func TestCheckRefusesAKillBeforeTheStart(t *testing.T) {
	ctx := testContext(t)
	if err := crashtest.Check(ctx, memStores(), crashtest.Reference{Events: 25}, crashtest.Case{KillAfter: 0}); err == nil {
		t.Fatal("KillAfter(0) accepted: nothing would be durable to recover")
	}
}
