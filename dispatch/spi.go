package dispatch

import (
	"context"
	"encoding/json"

	"github.com/loom-kernel/loom/fold"
)

// DispatcherSPIVersion is the version of the Dispatcher SPI (spec §7,
// DISPATCHER_SPI_VERSION): the Dispatcher and WorkerRuntime contracts and
// the JSON of ExecutionPackage and ExecutionResult. A MINOR bump adds an
// optional capability or an optional field; a MAJOR bump changes a required
// contract. dispatchtest.RunDispatcher is its conformance kit.
//
// 1.1.0 added ExecutionPackage.Principal (optional).
const DispatcherSPIVersion = "1.1.0"

// WorkerRuntime runs packages: the stateless half of the placement seam
// (LocalWorker in process, workerhttp.RemoteWorker across a network).
type WorkerRuntime interface {
	// Execute runs pkg to the execution's next settle point — parked at a
	// gate or ended — and reports it. A flow that fails is reported as a
	// result (StatusFailed), not as an error; the error is for a package
	// that did not run or whose outcome is unknown (refused, invalid,
	// unreachable worker, ctx ended). Execute must tolerate duplicates: a
	// start of an existing execution and a recover of a settled one report
	// its state. It must not retain pkg's byte slices after it returns.
	Execute(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error)
}

// Dispatcher places packages onto workers: the ExecutionDispatcher SPI of
// spec §7. Dispatch has Execute's contract; a dispatcher adds placement
// policy (where, how many at once, what to do on failure) around it.
type Dispatcher interface {
	Dispatch(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error)
}

// ExecutionResult is an execution at its settle point, as a worker reports
// it. Field names are stable JSON; see the package doc.
type ExecutionResult struct {
	// ExecutionID is the package's execution id.
	ExecutionID string `json:"executionId"`
	// Status is the folded status: suspended, or terminal (completed,
	// failed, cancelled, continued).
	Status fold.Status `json:"status"`
	// Output is the recorded output of a completed execution.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the recorded failure message of a failed execution.
	Error string `json:"error,omitempty"`
	// SuspendedOn is the gate a suspended execution is parked on: what the
	// next resume package answers.
	SuspendedOn string `json:"suspendedOn,omitempty"`
	// Sequence is the sequence of the last event folded into the reported
	// state.
	Sequence int64 `json:"sequence"`
}

// ResultFromState reports a folded state as an ExecutionResult: what a
// WorkerRuntime over a loom.Runtime returns once WaitForSettled does.
func ResultFromState(executionID string, st fold.State) ExecutionResult {
	r := ExecutionResult{ExecutionID: executionID, Status: st.Status, Sequence: st.Sequence}
	switch st.Status {
	case fold.StatusCompleted:
		r.Output = st.Variables.Output
	case fold.StatusFailed:
		r.Error = errorMessage(st.Variables.Error)
	case fold.StatusSuspended:
		if on := st.Variables.SuspendedOn; on != nil {
			r.SuspendedOn = on.On
		}
	}
	return r
}

// errorMessage reads the message of a recorded EXECUTION_FAILED error,
// {"message": …}, or returns the raw JSON of another shape.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(raw)
}
