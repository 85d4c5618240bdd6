package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
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
