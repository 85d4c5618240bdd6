package inspect

import (
	"context"
	"errors"
	"net/http"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/wire"
)

// Checker is what the inspector judges an execution's log against the
// running app's code through (Options.Check): a *wire.Client of the app
// (execution.checkReplay, wire ABI 1.6.0), or RuntimeChecker(rt) inside
// the app's own process.
type Checker interface {
	CheckReplay(ctx context.Context, p wire.CheckReplayParams) (wire.CheckReplayResult, error)
}

var _ Checker = (*wire.Client)(nil)

// RuntimeChecker is the Checker of an inspector mounted in the app that
// runs rt: rt.CheckExecution, the log of rt's own store under the flows
// rt has registered.
func RuntimeChecker(rt *loom.Runtime) Checker { return runtimeChecker{rt} }

type runtimeChecker struct{ rt *loom.Runtime }

func (c runtimeChecker) CheckReplay(ctx context.Context, p wire.CheckReplayParams) (wire.CheckReplayResult, error) {
	rep, err := c.rt.CheckExecution(ctx, p.ExecutionID)
	return wire.CheckReplayResult{ExecutionID: p.ExecutionID, Report: rep}, err
}

// check is GET /api/check?id=: the app's verdict on the execution's log
// under the code it runs now (a loom.ReplayReport: compatible, diverged at
// a sequence, a code-pin mismatch, …). Without Options.Check it answers
// 501, saying how to connect the inspector to the app.
func (in *Inspector) check(w http.ResponseWriter, r *http.Request) {
	if in.opts.Check == nil {
		in.writeError(w, http.StatusNotImplemented, "this inspector reads a store without the app's code: serve it with --app "+
			"(the app's wire ABI), or mount it in the app with Options.Check, to check logs against the code deployed")
		return
	}
	id := r.URL.Query().Get("id")
	if id == "" {
		in.writeError(w, http.StatusBadRequest, "id is required: the execution whose log to check")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), ActionTimeout)
	defer cancel()
	res, err := in.opts.Check.CheckReplay(ctx, wire.CheckReplayParams{ExecutionID: id})
	var we *wire.Error
	var bad *event.InvalidEnvelopeError
	var nc *loom.NotConfiguredError
	var denied *loom.ExecutionDeniedError
	switch {
	case err == nil:
		in.writeJSON(w, res)
	case errors.As(err, &we):
		in.appFailed(w, err)
	case errors.Is(err, loom.ErrExecutionNotFound):
		in.writeError(w, http.StatusNotFound, "the app's store has no execution "+id)
	case errors.As(err, &bad):
		in.writeError(w, http.StatusBadRequest, bad.Error())
	case errors.As(err, &nc):
		in.writeError(w, http.StatusNotImplemented, nc.Error())
	case errors.As(err, &denied):
		in.writeError(w, http.StatusForbidden, denied.Error())
	case errors.Is(err, context.DeadlineExceeded):
		in.writeError(w, http.StatusGatewayTimeout, "the check did not finish within "+ActionTimeout.String())
	default:
		in.opts.Logger.Error("inspect: checking a log", "execution", id, "error", err)
		in.writeError(w, http.StatusBadGateway, "the check failed (the inspector's log has the cause)")
	}
}
