package loom_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// K9 under the retry ring: a non-idempotent step that crashed during a
// retried attempt (STEP_RETRYING durable, no outcome) is parked in doubt
// under that attempt's number — never run again silently, and never under a
// new attempt the operator's verdict would not name.
func TestRingRetryCrashDuringARetriedNonIdempotentAttemptParksInDoubt(t *testing.T) {
	entered, hold := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	pay := func(ctx context.Context, _ json.RawMessage) (any, error) {
		if runs.Add(1) == 1 {
			return nil, errors.New("gateway timeout")
		}
		close(entered)
		<-hold // the process dies while attempt 2 is in flight
		return "charged", nil
	}
	flow := loom.NewFlow("pay", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Execute(&loom.Task{ID: "charge", NonIdempotent: true, Invoke: pay}, nil)
	})
	retry := []effect.Middleware{middleware.Retry(middleware.RetryPolicy{
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: first, Flows: []*loom.Flow{flow}, Middleware: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	defer close(hold)
	if _, err := rt.Start(ctx, "pay", nil, loom.WithExecutionID("p1")); err != nil {
		t.Fatal(err)
	}
	<-entered
	// What survives the crash is what is durable when attempt 2 runs: the
	// retry ring made STEP_RETRYING durable before it.
	durable, err := store.Read(ctx, first, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if last := durable[len(durable)-1]; last.Type != event.StepRetrying {
		t.Fatalf("durable log ends with %s, want STEP_RETRYING before attempt 2 runs", last.Type)
	}
	survivor := memstore.NewEventStore()
	if err := survivor.Append(ctx, "p1", 0, durable); err != nil {
		t.Fatal(err)
	}

	var rerun atomic.Int64
	again := loom.NewFlow("pay", func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		return ctx.Execute(&loom.Task{ID: "charge", NonIdempotent: true,
			Invoke: func(context.Context, json.RawMessage) (any, error) { rerun.Add(1); return "charged twice", nil }}, nil)
	})
	fresh, err := loom.New(loom.Config{Events: survivor, Flows: []*loom.Flow{again}, Middleware: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if n, err := fresh.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover re-drove %d: %v", n, err)
	}
	st, err := fresh.WaitForSuspend(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if rerun.Load() != 0 {
		t.Fatal("the in-doubt attempt ran again")
	}
	if park := st.Variables.SuspendedOn; park == nil || park.On != fold.GateInDoubt || park.StepID != "charge" ||
		park.Attempt == nil || *park.Attempt != 2 {
		t.Fatalf("parked on %+v, want the in-doubt gate for charge attempt 2", park)
	}
	if _, ok := st.Variables.InDoubt[fold.InDoubtKey("charge", 2)]; !ok {
		t.Fatalf("in-doubt facts %v", st.Variables.InDoubt)
	}
}
