package dispatchtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
)

// RunDispatcher runs the Dispatcher conformance kit against the dispatchers
// factory builds, one fresh dispatcher per subtest. See the package doc.
func RunDispatcher(t *testing.T, factory Factory) {
	t.Helper()
	cases := []struct {
		name string
		run  func(*env)
	}{
		{"StartRunsToItsFirstPark", startRunsToItsFirstPark},
		{"ResumeDrivesToCompletion", resumeDrivesToCompletion},
		{"StartWithoutGateCompletes", startWithoutGateCompletes},
		{"FailedFlowIsAResultNotAnError", failedFlowIsAResult},
		{"DuplicateStartReportsTheState", duplicateStartReportsTheState},
		{"DuplicateStartAfterTheEndReportsTheOutcome", duplicateStartAfterTheEnd},
		{"ConcurrentDuplicateStartsRunEachStepOnce", concurrentDuplicateStarts},
		{"DuplicateResumeIsRefusedNotRetried", duplicateResumeIsRefused},
		{"WrongGateIsRefusedAndLeavesTheParkResumable", wrongGateIsRefused},
		{"RecoverOfAParkedExecutionReportsIt", recoverOfAParkedExecution},
		{"RecoverOfAMissingExecutionIsRefused", recoverOfAMissingExecution},
		{"UnknownFlowIsRefused", unknownFlowIsRefused},
		{"InvalidPackageIsRefused", invalidPackageIsRefused},
		{"CancelledContextIsNotRetryable", cancelledContext},
		{"ConcurrentDispatchesAllSettle", concurrentDispatches},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(newEnv(t, factory)) })
	}
}

func startRunsToItsFirstPark(e *env) {
	id := e.id("park")
	res := e.must(startGate(id, 7))
	if res.Status != fold.StatusSuspended || res.SuspendedOn != GateApprove {
		e.t.Fatalf("start reported %s on %q, want suspended on %q", res.Status, res.SuspendedOn, GateApprove)
	}
	if res.Sequence <= 0 || len(res.Output) != 0 || res.Error != "" {
		e.t.Fatalf("start reported %+v: want a positive sequence, no output, no error", res)
	}
	e.wantRuns(id, "prepare", 1)
}

func resumeDrivesToCompletion(e *env) {
	id := e.id("resume")
	e.must(startGate(id, 7))
	res := e.must(approve(id, true))
	if res.Status != fold.StatusCompleted {
		e.t.Fatalf("resume reported %s (%s), want completed", res.Status, res.Error)
	}
	e.wantJSON(res.Output, `{"n":7,"approved":true}`)
	e.wantRuns(id, "prepare", 1)
	e.wantRuns(id, "finish", 1)
}

func startWithoutGateCompletes(e *env) {
	id := e.id("echo")
	res := e.must(dispatch.ExecutionPackage{ExecutionID: id, FlowID: FlowEcho, Input: json.RawMessage(`{"sku":"x-1","qty":12345678901234567}`)})
	if res.Status != fold.StatusCompleted {
		e.t.Fatalf("echo reported %s, want completed", res.Status)
	}
	// Numbers survive byte-exact: no float round trip anywhere on the way.
	e.wantJSON(res.Output, `{"sku":"x-1","qty":12345678901234567}`)
	e.wantRuns(id, "echo", 1)
}

func failedFlowIsAResult(e *env) {
	res := e.must(dispatch.ExecutionPackage{ExecutionID: e.id("fail"), FlowID: FlowFail})
	if res.Status != fold.StatusFailed || !strings.Contains(res.Error, FailMessage) {
		e.t.Fatalf("failing flow reported %s with error %q, want failed with %q", res.Status, res.Error, FailMessage)
	}
}

func duplicateStartReportsTheState(e *env) {
	id := e.id("dup")
	first := e.must(startGate(id, 1))
	second := e.must(startGate(id, 1))
	if second.Status != fold.StatusSuspended || second.SuspendedOn != first.SuspendedOn || second.Sequence != first.Sequence {
		e.t.Fatalf("duplicate start reported %+v, want the first report %+v", second, first)
	}
	e.wantRuns(id, "prepare", 1)
}

func duplicateStartAfterTheEnd(e *env) {
	id := e.id("dup-end")
	pkg := dispatch.ExecutionPackage{ExecutionID: id, FlowID: FlowEcho, Input: json.RawMessage(`"once"`)}
	e.must(pkg)
	res := e.must(pkg)
	if res.Status != fold.StatusCompleted {
		e.t.Fatalf("duplicate start of an ended execution reported %s, want completed", res.Status)
	}
	e.wantJSON(res.Output, `"once"`)
	e.wantRuns(id, "echo", 1)
}

func concurrentDuplicateStarts(e *env) {
	id := e.id("dup-many")
	errs := e.parallel(8, func(int) error {
		res, err := e.dispatch(startGate(id, 3))
		if err == nil && res.Status != fold.StatusSuspended {
			err = errors.New("reported " + string(res.Status) + ", want suspended")
		}
		return err
	})
	for _, err := range errs {
		if err != nil {
			e.t.Fatalf("concurrent duplicate start: %v", err)
		}
	}
	e.wantRuns(id, "prepare", 1)
}

func duplicateResumeIsRefused(e *env) {
	id := e.id("dup-resume")
	e.must(startGate(id, 2))
	e.must(approve(id, true))
	_, err := e.dispatch(approve(id, true))
	e.wantRefused(err, loom.RefusedTerminal)
	e.wantRuns(id, "finish", 1)
}

func wrongGateIsRefused(e *env) {
	id := e.id("wrong-gate")
	parked := e.must(startGate(id, 4))
	wrong := approve(id, true)
	wrong.Resume.EventType = "not-the-gate"
	_, err := e.dispatch(wrong)
	e.wantRefused(err, loom.RefusedGateMismatch)
	again := e.must(recoverPkg(id, FlowGate))
	if again.Status != fold.StatusSuspended || again.Sequence != parked.Sequence {
		e.t.Fatalf("after a refusal the execution is %s at %d, want suspended at %d (nothing appended)",
			again.Status, again.Sequence, parked.Sequence)
	}
	if res := e.must(approve(id, false)); res.Status != fold.StatusCompleted {
		e.t.Fatalf("the right answer after a refusal reported %s, want completed", res.Status)
	}
}

func recoverOfAParkedExecution(e *env) {
	id := e.id("recover-parked")
	parked := e.must(startGate(id, 5))
	res := e.must(recoverPkg(id, FlowGate))
	if res.Status != fold.StatusSuspended || res.SuspendedOn != GateApprove || res.Sequence != parked.Sequence {
		e.t.Fatalf("recover of a parked execution reported %+v, want %+v (nothing appended)", res, parked)
	}
}

func recoverOfAMissingExecution(e *env) {
	_, err := e.dispatch(recoverPkg(e.id("never-started"), FlowGate))
	if !errors.Is(err, loom.ErrExecutionNotFound) || dispatch.IsRetryable(err) {
		e.t.Fatalf("recover of a missing execution: %v, want loom.ErrExecutionNotFound, not retryable", err)
	}
}

func unknownFlowIsRefused(e *env) {
	_, err := e.dispatch(dispatch.ExecutionPackage{ExecutionID: e.id("unknown"), FlowID: "dispatchtest.no-such-flow"})
	if !errors.Is(err, loom.ErrUnknownFlow) || dispatch.IsRetryable(err) {
		e.t.Fatalf("unknown flow: %v, want loom.ErrUnknownFlow, not retryable", err)
	}
}

func invalidPackageIsRefused(e *env) {
	bad := []dispatch.ExecutionPackage{
		{ExecutionID: "bad\x00id", FlowID: FlowEcho},
		{ExecutionID: e.id("no-flow")},
		{ExecutionID: e.id("bad-json"), FlowID: FlowEcho, Input: json.RawMessage(`{"open":`)},
		{ExecutionID: e.id("both"), FlowID: FlowGate, Resume: &dispatch.ResumeHint{Recover: true, EventType: GateApprove}},
		{ExecutionID: e.id("input-on-resume"), FlowID: FlowGate, Input: json.RawMessage(`1`), Resume: &dispatch.ResumeHint{EventType: GateApprove}},
		{ExecutionID: e.id("too-big"), FlowID: FlowEcho, Input: json.RawMessage(`"` + strings.Repeat("x", dispatch.MaxPayloadBytes) + `"`)},
	}
	for i, pkg := range bad {
		_, err := e.dispatch(pkg)
		if !errors.Is(err, dispatch.ErrInvalidPackage) || dispatch.IsRetryable(err) {
			e.t.Errorf("invalid package %d: %v, want dispatch.ErrInvalidPackage, not retryable", i, err)
		}
	}
}

func cancelledContext(e *env) {
	ctx, cancel := context.WithCancel(e.t.Context())
	cancel()
	_, err := e.d.Dispatch(ctx, startGate(e.id("cancelled"), 1))
	if !errors.Is(err, context.Canceled) || dispatch.IsRetryable(err) {
		e.t.Fatalf("dispatch with a cancelled context: %v, want context.Canceled, not retryable", err)
	}
}

func concurrentDispatches(e *env) {
	const n = 32
	id := func(i int) string { return e.id("many-" + strconv.Itoa(i)) }
	check := func(what string, want fold.Status, errs []error, results []dispatch.ExecutionResult) {
		for i, err := range errs {
			if err != nil {
				e.t.Fatalf("%s %d: %v", what, i, err)
			}
			if results[i].Status != want || results[i].ExecutionID != id(i) {
				e.t.Fatalf("%s %d reported %s for %q, want %s for %q", what, i, results[i].Status, results[i].ExecutionID, want, id(i))
			}
		}
	}
	results := make([]dispatch.ExecutionResult, n)
	errs := e.parallel(n, func(i int) (err error) { results[i], err = e.dispatch(startGate(id(i), i)); return err })
	check("start", fold.StatusSuspended, errs, results)
	errs = e.parallel(n, func(i int) (err error) { results[i], err = e.dispatch(approve(id(i), i%2 == 0)); return err })
	check("resume", fold.StatusCompleted, errs, results)
	for i := range n {
		e.wantRuns(id(i), "prepare", 1)
		e.wantRuns(id(i), "finish", 1)
	}
}

// parallel runs fn(0..n-1) on n goroutines and returns their errors.
func (e *env) parallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = fn(i)
		}()
	}
	for range n {
		<-done
	}
	return errs
}

func (e *env) wantRuns(id, step string, want int) {
	e.t.Helper()
	if got := e.runs.count(id, step); got != want {
		e.t.Fatalf("step %q of %s ran %d times, want %d", step, id, got, want)
	}
}

// wantJSON compares JSON values, numbers by their digits (never through a
// float), object keys in any order.
func (e *env) wantJSON(got json.RawMessage, want string) {
	e.t.Helper()
	a, errA := decodeExact(got)
	b, errB := decodeExact([]byte(want))
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
		e.t.Fatalf("output %s, want %s", got, want)
	}
}

func decodeExact(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func (e *env) wantRefused(err error, reason loom.RefusalReason) {
	e.t.Helper()
	var r *loom.ResumeRefusedError
	if !errors.As(err, &r) || r.Reason != reason || dispatch.IsRetryable(err) {
		e.t.Fatalf("got %v, want a *loom.ResumeRefusedError (%s), not retryable", err, reason)
	}
}
