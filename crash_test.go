package loom_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// TestCrashMatrixMemstore kills the crash-matrix flows at every append
// point of their logs, in StepDurable and WriteBehind mode, over memory
// stores, and recovers them in a fresh runtime (see internal/crashtest): it
// completes, no durably completed step runs again, the log has no gap or
// duplicate, and the final state is the uncrashed run's. The payment flow
// adds K9: a non-idempotent step whose start the crash left without an
// outcome parks in doubt and acts exactly once in all (also when the
// process dies inside its effect), and a sink step's deliveries carry one
// idempotency key.
func TestCrashMatrixMemstore(t *testing.T) {
	crashtest.Run(t, func(t *testing.T) crashtest.Stores {
		return crashtest.Stores{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore()}
	})
}

// gatedAppends holds every Append until release is closed, after saying so
// on appending.
type gatedAppends struct {
	store.EventStore
	appending chan struct{}
	release   chan struct{}
}

func (g *gatedAppends) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	select {
	case g.appending <- struct{}{}:
	default:
	}
	<-g.release
	return g.EventStore.Append(ctx, id, expected, evs)
}

// signalHandler is a slog.Handler that signals every record on ch.
type signalHandler struct{ ch chan string }

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// A runtime closed while a Start is making EXECUTION_STARTED durable must
// not start the drive afterwards: Close has returned, so no flow of that
// runtime may run any more (it would be a process running after its own
// shutdown). The execution stays as its log has it and a fresh runtime
// recovers it, running the step once.
func TestCrashRecoveryAfterCloseDuringStart(t *testing.T) {
	var runs atomic.Int64
	entered := make(chan struct{}, 1)
	flow := loom.NewFlow("once", func(ctx *loom.Context, _ struct{}) (int, error) {
		out, err := ctx.Run("effect", func(context.Context) (any, error) {
			runs.Add(1)
			select {
			case entered <- struct{}{}:
			default:
			}
			return 1, nil
		})
		if err != nil {
			return 0, err
		}
		return int(out[0] - '0'), nil
	})
	events := memstore.NewEventStore()
	gated := &gatedAppends{EventStore: events, appending: make(chan struct{}, 1), release: make(chan struct{})}
	logged := make(chan string, 1)
	rt, err := loom.New(loom.Config{Events: gated, Flows: []*loom.Flow{flow}, Logger: slog.New(signalHandler{logged})})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() {
		_, err := rt.Start(context.Background(), "once", nil, loom.WithExecutionID("close-race"))
		started <- err
	}()
	<-gated.appending // the execution is claimed, EXECUTION_STARTED on its way
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	close(gated.release)
	if err := <-started; err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case <-entered:
		t.Fatal("a drive started after Close returned and ran a step")
	case msg := <-logged:
		t.Logf("closed runtime said: %s", msg)
	}
	fresh, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := fresh.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("Recover re-drove %d: %v", n, err)
	}
	if res, err := fresh.WaitForCompletion(ctx, "close-race"); err != nil || string(res.Output) != "1" {
		t.Fatalf("%s %v", res.Output, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("the step ran %d times", runs.Load())
	}
}
