package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/loom-kernel/loom"
)

// LocalWorker is the in-process WorkerRuntime: it runs packages on a
// *loom.Runtime through the runtime's public API, so every rule of the
// runtime holds (the ingress gate, the authenticator, the authorizer, every
// refusal appending nothing). The Runtime must register every flow the
// packages name; over a shared store (PostgreSQL) any node's LocalWorker
// can run any package.
//
// What Execute does with a package:
//
//   - start: Runtime.Start under the package's execution id. An execution
//     that exists already (loom.ErrExecutionExists: a duplicate dispatch) is
//     not an error: its state is reported as it stands — the package's flow
//     id and input are not compared with the existing execution's, and a
//     crashed one is not re-driven (that takes a recover package).
//   - resume: Runtime.Resume with the gate answer. If the execution is still
//     running (refused "not-suspended": it has not parked yet), Execute waits
//     for it to settle and tries once more. Every other refusal is returned
//     as the runtime's typed error.
//   - recover: Runtime.Resume with EXECUTION_RECOVERED. An execution that is
//     parked or ended (refused "not-recoverable") or driven by this runtime
//     (refused "not-suspended") is not re-driven: its state is reported.
//
// Then it waits (Runtime.WaitForSettled) until the execution is parked or
// has ended and reports it. The wait ends with ctx: an execution whose drive
// aborted on a store write failure stays running and never settles, so bound
// ctx, and re-drive such an execution with a recover package. A ctx that
// ends during the wait leaves the execution running in the runtime; a later
// duplicate package reports it. The same holds for a resume of an execution
// that is running without a driver anywhere.
//
// Concurrent duplicate starts through one LocalWorker are coalesced: the
// runtime refuses a second start of an id as soon as the first claims it,
// before its EXECUTION_STARTED is durable, so the duplicate waits for the
// first start to return before it reads the execution. Share one LocalWorker
// per runtime; a duplicate of a start in flight outside it fails with the
// retryable *StartInFlightError. A LocalWorker must not be copied after
// first use.
type LocalWorker struct {
	// Runtime runs the packages. Required.
	Runtime *loom.Runtime

	mu       sync.Mutex
	starting map[string]chan struct{} // execution id → closed when its Start returns
}

// StartInFlightError reports a start package whose execution id another
// start in the runtime has claimed but not yet made durable (one that did
// not go through this LocalWorker). Nothing ran for this package; it is
// retryable, and a retry reports the execution once it exists.
type StartInFlightError struct {
	ExecutionID string
}

func (e *StartInFlightError) Error() string {
	return "dispatch: execution " + strconv.Quote(e.ExecutionID) + ": another start of it is in flight; dispatch again"
}

// Retryable reports true: the other start settles soon.
func (e *StartInFlightError) Retryable() bool { return true }

// Execute runs pkg to its next settle point; see LocalWorker. It refuses an
// invalid package with a *PackageError and a nil Runtime with ErrNoWorker,
// before anything runs.
func (w *LocalWorker) Execute(ctx context.Context, pkg ExecutionPackage) (ExecutionResult, error) {
	if w == nil || w.Runtime == nil {
		return ExecutionResult{}, ErrNoWorker
	}
	if err := pkg.Validate(); err != nil {
		return ExecutionResult{}, err
	}
	var err error
	switch pkg.Kind() {
	case "start":
		err = w.start(ctx, pkg)
	case "recover":
		err = w.recover(ctx, pkg)
	default:
		err = w.resume(ctx, pkg)
	}
	if err != nil {
		return ExecutionResult{}, err
	}
	res, err := w.settled(ctx, pkg.ExecutionID)
	if errors.Is(err, loom.ErrExecutionNotFound) && pkg.Kind() == "start" {
		return ExecutionResult{}, &StartInFlightError{ExecutionID: pkg.ExecutionID}
	}
	return res, err
}

func (w *LocalWorker) start(ctx context.Context, pkg ExecutionPackage) error {
	input := json.RawMessage("null")
	if len(pkg.Input) > 0 {
		input = pkg.Input
	}
	id := pkg.ExecutionID
	for {
		w.mu.Lock()
		if w.starting == nil {
			w.starting = map[string]chan struct{}{}
		}
		if first, dup := w.starting[id]; dup {
			w.mu.Unlock()
			select { // a duplicate in flight here: let it make its start durable (or fail)
			case <-first:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		w.starting[id] = done
		w.mu.Unlock()
		sctx := ctx
		if len(pkg.Principal) > 0 {
			sctx = loom.WithPrincipal(ctx, pkg.Principal)
		}
		_, err := w.Runtime.Start(sctx, pkg.FlowID, input, loom.WithExecutionID(id))
		w.mu.Lock()
		delete(w.starting, id)
		close(done)
		w.mu.Unlock()
		if errors.Is(err, loom.ErrExecutionExists) {
			return nil // a duplicate: report the execution as it stands
		}
		return err
	}
}

func (w *LocalWorker) resume(ctx context.Context, pkg ExecutionPackage) error {
	ev := loom.ResumeEvent{EventType: pkg.Resume.EventType, Payload: pkg.Resume.Payload, Credentials: pkg.Resume.Credentials}
	err := w.Runtime.Resume(ctx, pkg.ExecutionID, ev)
	if refusedFor(err, loom.RefusedNotSuspended) {
		// Still running towards its park: the spec's advice is to retry
		// once it is parked, so wait for that and answer once more.
		if _, werr := w.Runtime.WaitForSettled(ctx, pkg.ExecutionID); werr != nil {
			return werr
		}
		err = w.Runtime.Resume(ctx, pkg.ExecutionID, ev)
	}
	return err
}

func (w *LocalWorker) recover(ctx context.Context, pkg ExecutionPackage) error {
	err := w.Runtime.Resume(ctx, pkg.ExecutionID, loom.ResumeEvent{EventType: executionRecovered})
	if refusedFor(err, loom.RefusedNotRecoverable) || refusedFor(err, loom.RefusedNotSuspended) {
		return nil // settled already, or driven here: nothing to re-drive
	}
	return err
}

func (w *LocalWorker) settled(ctx context.Context, id string) (ExecutionResult, error) {
	st, err := w.Runtime.WaitForSettled(ctx, id)
	if err != nil {
		return ExecutionResult{}, err
	}
	return ResultFromState(id, st), nil
}

// refusedFor reports whether err is the ingress gate's refusal for reason.
func refusedFor(err error, reason loom.RefusalReason) bool {
	var r *loom.ResumeRefusedError
	return errors.As(err, &r) && r.Reason == reason
}
