package dispatch_test

import (
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/dispatch/dispatchtest"
	"github.com/loom-kernel/loom/store/memstore"
)

// newRuntime builds a runtime over a fresh memstore with flows, closed when
// the test ends.
func newRuntime(t *testing.T, flows []*loom.Flow) *loom.Runtime {
	t.Helper()
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore(), Flows: flows})
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

// The SPI's conformance kit (spec §7) over the in-process placement:
// LocalDispatcher → LocalWorker → loom.Runtime on memstore.
func TestSpec7DispatcherConformanceLocalDispatcher(t *testing.T) {
	dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
		return &dispatch.LocalDispatcher{Worker: &dispatch.LocalWorker{Runtime: newRuntime(t, flows)}, MaxConcurrent: 4}
	})
}

// The supervisor is a Dispatcher too, and must not change what a healthy
// dispatcher reports: refusals pass through untouched, once.
func TestSpec7DispatcherConformanceSupervisingDispatcher(t *testing.T) {
	dispatchtest.RunDispatcher(t, func(t *testing.T, flows []*loom.Flow) dispatch.Dispatcher {
		local := &dispatch.LocalDispatcher{Worker: &dispatch.LocalWorker{Runtime: newRuntime(t, flows)}}
		s, err := dispatch.NewSupervisingDispatcher(local, dispatch.SupervisorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
