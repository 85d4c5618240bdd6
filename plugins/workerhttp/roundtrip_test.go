package workerhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/dispatch/dispatchtest"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

// The whole placement path over a real loopback socket: RemoteWorker →
// Server → LocalWorker → loom.Runtime on memstore. A start parks at the
// gate, a duplicate start reports the same park, a resume completes it, and
// the log holds exactly one run of each step.
func TestRoundTripStartParksThenResumeCompletes(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{})
	start := dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders", Input: json.RawMessage(`"sku-1"`)}
	res, err := s.remote.Execute(t.Context(), start)
	if err != nil || res.Status != fold.StatusSuspended || res.SuspendedOn != "approve" {
		t.Fatalf("start: %+v, %v; want suspended on approve", res, err)
	}
	dup, err := s.remote.Execute(t.Context(), start)
	if err != nil || dup.Status != fold.StatusSuspended || dup.Sequence != res.Sequence {
		t.Fatalf("duplicate start: %+v, %v; want the same park at %d", dup, err, res.Sequence)
	}
	done, err := s.remote.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders",
		Resume: &dispatch.ResumeHint{EventType: "approve", Payload: json.RawMessage(`true`)}})
	if err != nil || done.Status != fold.StatusCompleted || string(done.Output) != `"sku-1 approved"` {
		t.Fatalf("resume: %+v, %v; want completed with \"sku-1 approved\"", done, err)
	}
	log, err := s.events.ReadFrom(t.Context(), "o-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range log {
		counts[e.Type]++
	}
	if counts[event.ExecutionStarted] != 1 || counts[event.StepCompleted] != 1 || counts[event.ExecutionSuspended] != 1 ||
		counts[event.ExecutionResumed] != 1 || counts[event.ExecutionCompleted] != 1 {
		t.Fatalf("event counts %v: want one start, one step, one park, one resume, one completion", counts)
	}
	if last := log[len(log)-1].Sequence; last != done.Sequence {
		t.Fatalf("result sequence %d, the log ends at %d", done.Sequence, last)
	}
}

// flaky answers the first n requests with 503, then hands over to h.
func flaky(n int32, h http.Handler, seen *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"warming up"}}`))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// The supervisor honours the transport's classification: a 5xx is
// restarted with backoff, a 4xx comes back at once.
func TestSupervisorRestartsA5xxButNotA4xx(t *testing.T) {
	node := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{})
	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: node.rt}, workerhttp.Options{Authenticate: workerhttp.BearerToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	url, hc := serve(t, flaky(2, srv, &seen))
	var waits []time.Duration
	s, err := dispatch.NewSupervisingDispatcher(&dispatch.LocalDispatcher{Worker: remoteTo(t, url, hc)}, dispatch.SupervisorOptions{
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "o-9", FlowID: "orders", Input: json.RawMessage(`"x"`)})
	if err != nil || res.Status != fold.StatusSuspended || seen.Load() != 3 || len(waits) != 2 {
		t.Fatalf("got %+v, %v after %d requests and waits %v; want suspended after 3 requests, 2 waits", res, err, seen.Load(), waits)
	}
	before := seen.Load()
	_, err = s.Dispatch(t.Context(), dispatch.ExecutionPackage{ExecutionID: "o-10", FlowID: "no-such-flow"})
	if !errors.Is(err, loom.ErrUnknownFlow) || seen.Load() != before+1 || len(waits) != 2 {
		t.Fatalf("4xx: %v after %d more requests; want loom.ErrUnknownFlow after exactly 1", err, seen.Load()-before)
	}
}

// The Dispatcher conformance kit (spec §7) across the network:
// LocalDispatcher → RemoteWorker → Server → LocalWorker → loom.Runtime.
func TestSpec7DispatcherConformanceRemoteWorker(t *testing.T) {
	dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
		s := newStack(t, flows, workerhttp.Options{})
		return &dispatch.LocalDispatcher{Worker: s.remote, MaxConcurrent: 16}
	})
}

// And under the supervisor, as an orchestrator would run it.
func TestSpec7DispatcherConformanceSupervisedRemoteWorker(t *testing.T) {
	dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
		s := newStack(t, flows, workerhttp.Options{})
		d, err := dispatch.NewSupervisingDispatcher(&dispatch.LocalDispatcher{Worker: s.remote},
			dispatch.SupervisorOptions{TargetOf: func(dispatch.ExecutionPackage) string { return s.url }})
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
