package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// An orchestrator places executions through a Dispatcher: here in process,
// at most 8 at a time. Each package carries coordinates only; the worker's
// runtime has the flow registered by id.
func ExampleLocalDispatcher() {
	approval := loom.NewFlow("refund", func(ctx *loom.Context, amount int) (string, error) {
		ok, err := loom.Suspend[bool](ctx, "approve")
		if err != nil || !ok {
			return "refused", err
		}
		return fmt.Sprintf("refunded %d", amount), nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{approval}})
	defer rt.Close()
	d := &dispatch.LocalDispatcher{Worker: &dispatch.LocalWorker{Runtime: rt}, MaxConcurrent: 8}
	ctx := context.Background()

	res, err := d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "r-1", FlowID: "refund", Input: json.RawMessage(`42`)})
	fmt.Println(res.Status, res.SuspendedOn, err)

	// A duplicate start (a retry after a lost answer) reports the same park.
	res, err = d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "r-1", FlowID: "refund", Input: json.RawMessage(`42`)})
	fmt.Println(res.Status, res.SuspendedOn, err)

	res, err = d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "r-1", FlowID: "refund",
		Resume: &dispatch.ResumeHint{EventType: "approve", Payload: json.RawMessage(`true`)}})
	fmt.Println(res.Status, string(res.Output), err)
	// Output:
	// suspended approve <nil>
	// suspended approve <nil>
	// completed "refunded 42" <nil>
}

// A SupervisingDispatcher restarts transient failures with backoff and
// fails fast once a target's breaker opens; refusals come back at once.
func ExampleNewSupervisingDispatcher() {
	calls := 0
	flaky := dispatcherFunc(func(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
		calls++
		if calls < 3 {
			return dispatch.ExecutionResult{}, errors.New("worker unreachable")
		}
		return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: "completed"}, nil
	})
	var waited []time.Duration
	s, _ := dispatch.NewSupervisingDispatcher(flaky, dispatch.SupervisorOptions{
		MaxRestarts: 4,
		BaseBackoff: 50 * time.Millisecond,
		// Tests and simulations inject the wait; production leaves it nil.
		Sleep: func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil },
	})
	res, err := s.Dispatch(context.Background(), dispatch.ExecutionPackage{ExecutionID: "x-1", FlowID: "f"})
	fmt.Println(res.Status, err, calls, waited)
	// Output: completed <nil> 3 [50ms 100ms]
}

type dispatcherFunc func(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	return f(ctx, pkg)
}

// IsRetryable separates what a restart may fix from what it cannot.
func ExampleIsRetryable() {
	fmt.Println(dispatch.IsRetryable(&loom.JournalError{ExecutionID: "x", Err: errors.New("disk full")}))
	fmt.Println(dispatch.IsRetryable(&loom.ResumeRefusedError{ExecutionID: "x", Reason: loom.RefusedGateMismatch}))
	fmt.Println(dispatch.IsRetryable(fmt.Errorf("starting: %w", loom.ErrUnknownFlow)))
	// Output:
	// true
	// false
	// false
}

// DecodePackage is how a transport reads a package off the network: strict
// and validated.
func ExampleDecodePackage() {
	pkg, err := dispatch.DecodePackage([]byte(`{"executionId":"o-1","flowId":"orders","resume":{"recover":true}}`))
	fmt.Println(pkg.Kind(), err)
	_, err = dispatch.DecodePackage([]byte(`{"executionId":"o-1","flowId":"orders","code":"func(){}"}`))
	fmt.Println(errors.Is(err, dispatch.ErrInvalidPackage))
	// Output:
	// recover <nil>
	// true
}

// A Queue holds starts durably and dispatches them under limits, one
// tenant's turn after another's: here three tenants' starts, at most two
// at a time, on a runtime in process.
func ExampleQueue() {
	greet := loom.NewFlow("greet", func(_ *loom.Context, name string) (string, error) { return "hello " + name, nil })
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{greet}})
	defer rt.Close()
	fair, _ := dispatch.NewFairScheduler(map[string]int{"acme": 2}, 1)
	settled := make(chan string, 3)
	q, _ := dispatch.NewQueue(dispatch.QueueConfig{
		Store:      memstore.NewQueueStore(),
		Name:       "greetings",
		Dispatcher: &dispatch.LocalDispatcher{Worker: &dispatch.LocalWorker{Runtime: rt}},
		Limits:     store.QueueLimits{Concurrency: 2},
		Scheduler:  fair,
		OnSettled: func(c store.Claim, res dispatch.ExecutionResult, err error) {
			settled <- fmt.Sprintf("%s %s %s %v", c.Item.ExecutionID, res.Status, res.Output, err)
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	for i, tenant := range []string{"acme", "globex", "initech"} {
		id, added, err := q.Enqueue(ctx, dispatch.EnqueueRequest{ExecutionID: fmt.Sprintf("g-%d", i), FlowID: "greet",
			Input: json.RawMessage(strconv.Quote(tenant)), Tenant: tenant})
		fmt.Println(id, added, err)
	}
	_, added, _ := q.Enqueue(ctx, dispatch.EnqueueRequest{ExecutionID: "g-0", FlowID: "greet", Tenant: "acme"})
	fmt.Println("duplicate added:", added)

	done := make(chan error)
	go func() { done <- q.Run(ctx) }()
	var lines []string
	for range 3 {
		lines = append(lines, <-settled)
	}
	cancel()
	<-done
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// g-0 true <nil>
	// g-1 true <nil>
	// g-2 true <nil>
	// duplicate added: false
	// g-0 completed "hello acme" <nil>
	// g-1 completed "hello globex" <nil>
	// g-2 completed "hello initech" <nil>
}

// A FairScheduler interleaves tenants by weight, deterministically.
func ExampleNewFairScheduler() {
	s, _ := dispatch.NewFairScheduler(map[string]int{"a": 3}, 1)
	var order []string
	for range 8 {
		t, _ := s.Pick([]string{"a", "b"})
		s.Claimed(t, 1)
		order = append(order, t)
	}
	fmt.Println(order)
	_, err := dispatch.NewFairScheduler(nil, 0)
	fmt.Println(err)
	// Output:
	// [a a b a a a b a]
	// dispatch: scheduler default weight 0: must be at least 1 (a tenant with no weight would never be picked)
}
