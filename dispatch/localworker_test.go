package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

type authorizerFunc func(ctx context.Context, req loom.AuthzRequest) error

func (f authorizerFunc) Authorize(ctx context.Context, req loom.AuthzRequest) error {
	return f(ctx, req)
}

// A resume that arrives while the execution still runs towards its park is
// refused by the runtime as not-suspended (spec §5: retry once parked): the
// worker waits for the park and answers once more, instead of failing the
// package. The authorizer sequences it without timing: the step that keeps
// the flow from parking is released only once the worker, refused, waits.
func TestLocalWorkerResumeBeforeTheParkWaitsAndAnswers(t *testing.T) {
	release := make(chan struct{})
	var resumes atomic.Int32
	var once sync.Once
	authz := authorizerFunc(func(_ context.Context, req loom.AuthzRequest) error {
		switch {
		case req.Action == "resume":
			resumes.Add(1)
		case req.Action == "query" && resumes.Load() > 0:
			once.Do(func() { close(release) })
		}
		return nil
	})
	flow := loom.NewFlow("slow-gate", func(ctx *loom.Context, _ json.RawMessage) (string, error) {
		if _, err := ctx.Run("work", func(context.Context) (any, error) { <-release; return true, nil }); err != nil {
			return "", err
		}
		return loom.Suspend[string](ctx, "go")
	})
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Start(t.Context(), "slow-gate", nil, loom.WithExecutionID("s-1")); err != nil {
		t.Fatal(err)
	}
	w := &dispatch.LocalWorker{Runtime: rt}
	res, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "s-1", FlowID: "slow-gate",
		Resume: &dispatch.ResumeHint{EventType: "go", Payload: json.RawMessage(`"yes"`)}})
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != `"yes"` {
		t.Fatalf("got %+v, %v; want completed with \"yes\"", res, err)
	}
	if n := resumes.Load(); n != 2 {
		t.Fatalf("%d resume attempts, want 2 (refused while running, then answered)", n)
	}
}

// A recover package re-drives an execution whose driver stopped (here: its
// runtime closed mid-step) on another runtime over the same store; a
// duplicate recover then reports the outcome and appends nothing.
func TestLocalWorkerRecoverRedrivesACrashedExecution(t *testing.T) {
	events := memstore.NewEventStore()
	var first atomic.Bool
	entered := make(chan struct{})
	flow := loom.NewFlow("crashy", func(ctx *loom.Context, _ json.RawMessage) (json.RawMessage, error) {
		return ctx.Run("work", func(c context.Context) (any, error) {
			if first.CompareAndSwap(false, true) {
				close(entered)
				<-c.Done() // the first driver stops mid-effect
				return nil, c.Err()
			}
			return "done", nil
		})
	})
	a, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(t.Context(), "crashy", nil, loom.WithExecutionID("c-1")); err != nil {
		t.Fatal(err)
	}
	<-entered
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := newRuntimeOn(t, events, flow)
	w := &dispatch.LocalWorker{Runtime: b}
	recoverPkg := dispatch.ExecutionPackage{ExecutionID: "c-1", FlowID: "crashy", Resume: &dispatch.ResumeHint{Recover: true}}
	res, err := w.Execute(t.Context(), recoverPkg)
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != `"done"` {
		t.Fatalf("recover: %+v, %v; want completed with \"done\"", res, err)
	}
	again, err := w.Execute(t.Context(), recoverPkg)
	if err != nil || again.Status != fold.StatusCompleted || again.Sequence != res.Sequence {
		t.Fatalf("duplicate recover: %+v, %v; want the same outcome at sequence %d", again, err, res.Sequence)
	}
	log, err := events.ReadFrom(t.Context(), "c-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	recovered := 0
	for _, e := range log {
		if e.Type == event.ExecutionRecovered {
			recovered++
		}
	}
	if recovered != 1 {
		t.Fatalf("%d EXECUTION_RECOVERED in the log, want 1", recovered)
	}
}

// blockingStore holds the first append of one execution until released, so
// a start outside the worker stays in flight with nothing durable.
type blockingStore struct {
	*memstore.EventStore
	id      string
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *blockingStore) hold(executionID string) {
	if executionID == s.id {
		s.once.Do(func() { close(s.held); <-s.release })
	}
}

func (s *blockingStore) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	s.hold(id)
	return s.EventStore.Append(ctx, id, expected, evs)
}

func (s *blockingStore) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	s.hold(id)
	return s.EventStore.AppendFenced(ctx, id, token, expected, evs)
}

// A start package for an id the application itself is starting right now
// (claimed, nothing durable yet) cannot be reported: the worker says so
// with a retryable error, and a retry once the start is durable reports it.
func TestLocalWorkerStartInFlightElsewhereIsRetryable(t *testing.T) {
	st := &blockingStore{EventStore: memstore.NewEventStore(), id: "f-1", held: make(chan struct{}), release: make(chan struct{})}
	flow := loom.NewFlow("gate", func(ctx *loom.Context, _ json.RawMessage) (bool, error) {
		return loom.Suspend[bool](ctx, "ok")
	})
	rt := newRuntimeOn(t, st, flow)
	started := make(chan error, 1)
	go func() {
		_, err := rt.Start(context.Background(), "gate", nil, loom.WithExecutionID("f-1"))
		started <- err
	}()
	<-st.held

	w := &dispatch.LocalWorker{Runtime: rt}
	pkg := dispatch.ExecutionPackage{ExecutionID: "f-1", FlowID: "gate"}
	_, err := w.Execute(t.Context(), pkg)
	var inFlight *dispatch.StartInFlightError
	if !errors.As(err, &inFlight) || !dispatch.IsRetryable(err) {
		t.Fatalf("duplicate of an in-flight start: %v, want a retryable *StartInFlightError", err)
	}
	close(st.release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if res, err := w.Execute(t.Context(), pkg); err != nil || res.Status != fold.StatusSuspended {
		t.Fatalf("retry: %+v, %v; want suspended", res, err)
	}
}

func TestLocalWorkerRefusals(t *testing.T) {
	var none dispatch.LocalWorker
	if _, err := none.Execute(t.Context(), pkgN(1)); !errors.Is(err, dispatch.ErrNoWorker) {
		t.Fatalf("no runtime: %v, want dispatch.ErrNoWorker", err)
	}
	w := &dispatch.LocalWorker{Runtime: newRuntime(t, nil)}
	if _, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f",
		Resume: &dispatch.ResumeHint{EventType: "g", Recover: true}}); !errors.Is(err, dispatch.ErrInvalidPackage) {
		t.Fatalf("invalid package: %v, want dispatch.ErrInvalidPackage", err)
	}
	if _, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "x", FlowID: "f",
		Resume: &dispatch.ResumeHint{EventType: "STEP_COMPLETED"}}); !errors.As(err, new(*loom.ResumeRefusedError)) {
		t.Fatalf("kernel event type: %v, want the ingress gate's *loom.ResumeRefusedError", err)
	}
}

// newRuntimeOn builds a runtime over events, closed when the test ends.
func newRuntimeOn(t *testing.T, events store.EventStore, flows ...*loom.Flow) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: events, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}
