package dispatchtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
)

// The flows the kit hands its Factory, by id, and the gate FlowGate parks on.
const (
	// FlowGate runs step "prepare", parks on GateApprove, runs step
	// "finish" and returns {"n": input.n, "approved": answer.approved}.
	FlowGate = "dispatchtest.gate"
	// FlowEcho runs step "echo" and returns its input.
	FlowEcho = "dispatchtest.echo"
	// FlowFail fails with the message FailMessage.
	FlowFail = "dispatchtest.fail"
	// GateApprove is the gate FlowGate parks on; its answer is
	// {"approved": bool}.
	GateApprove = "approve"
	// FailMessage is FlowFail's failure.
	FailMessage = "dispatchtest: boom"
)

// Factory builds the Dispatcher under test, placing packages on a runtime
// that registers flows (and may register more). It is called once per
// subtest; release what it builds with t.Cleanup.
type Factory func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher

// dispatchTimeout bounds every dispatch of the kit, so a dispatcher that
// loses a package fails the test instead of hanging it.
const dispatchTimeout = 30 * time.Second

type gateIn struct {
	N int `json:"n"`
}

type gateAnswer struct {
	Approved bool `json:"approved"`
}

type gateOut struct {
	N        int  `json:"n"`
	Approved bool `json:"approved"`
}

// runs counts each step's effect runs per execution.
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runs) inc(executionID, step string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[executionID+"/"+step]++
}

func (r *runs) count(executionID, step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[executionID+"/"+step]
}

// flows builds the kit's flows over r.
func flows(r *runs) []*loom.Flow {
	step := func(ctx *loom.Context, id string, out any) error {
		x := ctx.ExecutionID()
		_, err := ctx.Run(id, func(context.Context) (any, error) { r.inc(x, id); return out, nil })
		return err
	}
	gate := loom.NewFlow(FlowGate, func(ctx *loom.Context, in gateIn) (gateOut, error) {
		if err := step(ctx, "prepare", in.N); err != nil {
			return gateOut{}, err
		}
		ans, err := loom.Suspend[gateAnswer](ctx, GateApprove)
		if err != nil {
			return gateOut{}, err
		}
		if err := step(ctx, "finish", ans.Approved); err != nil {
			return gateOut{}, err
		}
		return gateOut{N: in.N, Approved: ans.Approved}, nil
	})
	echo := loom.NewFlow(FlowEcho, func(ctx *loom.Context, in json.RawMessage) (json.RawMessage, error) {
		return in, step(ctx, "echo", in)
	})
	fail := loom.NewFlow(FlowFail, func(ctx *loom.Context, _ json.RawMessage) (any, error) {
		return nil, errors.New(FailMessage)
	})
	return []*loom.Flow{gate, echo, fail}
}

// env is one subtest's dispatcher, counters and id namespace.
type env struct {
	t      *testing.T
	d      dispatch.Dispatcher
	runs   *runs
	prefix string
}

func newEnv(t *testing.T, factory Factory) *env {
	t.Helper()
	r := &runs{n: map[string]int{}}
	d := factory(t, flows(r))
	if d == nil {
		t.Fatal("dispatchtest: the factory returned a nil Dispatcher")
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, d: d, runs: r, prefix: "dt-" + hex.EncodeToString(b[:]) + "-"}
}

func (e *env) id(name string) string { return e.prefix + name }

// dispatch sends pkg under the kit's timeout.
func (e *env) dispatch(pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	ctx, cancel := context.WithTimeout(e.t.Context(), dispatchTimeout)
	defer cancel()
	return e.d.Dispatch(ctx, pkg)
}

// must dispatches pkg and fails the test on an error.
func (e *env) must(pkg dispatch.ExecutionPackage) dispatch.ExecutionResult {
	e.t.Helper()
	res, err := e.dispatch(pkg)
	if err != nil {
		e.t.Fatalf("dispatch %s of %s: %v", pkg.Kind(), pkg.ExecutionID, err)
	}
	if res.ExecutionID != pkg.ExecutionID {
		e.t.Fatalf("result for execution %q, want %q", res.ExecutionID, pkg.ExecutionID)
	}
	return res
}

func startGate(id string, n int) dispatch.ExecutionPackage {
	in, _ := json.Marshal(gateIn{N: n})
	return dispatch.ExecutionPackage{ExecutionID: id, FlowID: FlowGate, Input: in}
}

func approve(id string, ok bool) dispatch.ExecutionPackage {
	p, _ := json.Marshal(gateAnswer{Approved: ok})
	return dispatch.ExecutionPackage{ExecutionID: id, FlowID: FlowGate,
		Resume: &dispatch.ResumeHint{EventType: GateApprove, Payload: p}}
}

func recoverPkg(id, flow string) dispatch.ExecutionPackage {
	return dispatch.ExecutionPackage{ExecutionID: id, FlowID: flow, Resume: &dispatch.ResumeHint{Recover: true}}
}
