package loomtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// Env is one test's durable world: the stores, the fake clock, the mocks,
// and the process running on them now (a loom.Runtime, replaced by
// Restart). It is safe for concurrent use. Build it with New; the test's
// cleanup closes everything.
type Env struct {
	opts      options
	clock     *Clock
	events    innerStore // the durable log every process shares
	snapshots store.SnapshotStore
	timers    store.TimerStore
	branches  store.BranchRegistry
	mocks     mockSet
	ids       *idSource

	mu   sync.Mutex
	rt   *loom.Runtime
	proc *crashStore // the running process's view of events
}

// New builds an Env for t: memory stores (or a SQLite file in t.TempDir()
// with WithSQLite), a Clock at Epoch, and a runtime over them with the
// flows and mocks of opts. The runtime has no background timer poller
// (time moves only through the Env: SkipTime, FireNextTimer, AdvanceTime)
// and no automatic recovery (Restart recovers), ids from a counter
// (loomtest-0001…) so a log is the same on every run, and no log output.
// A store or runtime that cannot be built fails t at once. t.Cleanup
// closes the runtime, then the stores.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	e := &Env{opts: o, clock: o.clock, mocks: mockSet{}, ids: &idSource{}}
	if e.clock == nil {
		e.clock = NewClock(time.Time{})
	}
	for _, m := range o.mocks {
		if _, dup := e.mocks[m.toolID]; dup {
			t.Fatalf("loomtest: two mocks of tool %q", m.toolID)
		}
		if err := m.bind(); err != nil {
			t.Fatal(err)
		}
		e.mocks[m.toolID] = m
	}
	closeStores, err := e.openStores(t)
	if err != nil {
		t.Fatalf("loomtest: opening the stores: %v", err)
	}
	t.Cleanup(func() {
		e.mu.Lock()
		rt := e.rt
		e.rt = nil
		e.mu.Unlock()
		if rt != nil {
			_ = rt.Close() // Close reports nothing but success
		}
		if err := closeStores(); err != nil {
			t.Errorf("loomtest: closing the stores: %v", err)
		}
	})
	if err := e.open(); err != nil {
		t.Fatalf("loomtest: building the runtime: %v", err)
	}
	return e
}

// openStores opens the durable stores and returns what closes them.
func (e *Env) openStores(t testing.TB) (func() error, error) {
	if e.opts.sqlite {
		// SyncNormal: an acknowledged append survives a process crash, the
		// one failure a test simulates, without an fsync per commit.
		st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "loom.db"), Synchronous: sqlite.SyncNormal})
		if err != nil {
			return nil, err
		}
		e.events, err = asInner(st.Events)
		if err != nil {
			return nil, errors.Join(err, st.Close())
		}
		e.snapshots, e.timers, e.branches = st.Snapshots, st.Timers, st.Branches
		return st.Close, nil
	}
	events, snaps, timers, branches := memstore.NewEventStore(), memstore.NewSnapshotStore(), memstore.NewTimerStore(), memstore.NewBranchRegistry()
	e.events, e.snapshots, e.timers, e.branches = events, snaps, timers, branches
	return func() error { return errors.Join(events.Close(), snaps.Close(), timers.Close(), branches.Close()) }, nil
}

// open starts a process on the stores: a runtime writing through a fresh
// crash wrapper.
func (e *Env) open() error {
	proc := newCrashStore(e.events)
	cfg := loom.Config{Events: proc, Snapshots: e.snapshots, Branches: e.branches, Timers: e.timers,
		TimerPoll: -1, Flows: e.opts.flows, Clock: e.clock, NewID: e.ids.next, NodeID: "loomtest-node",
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	for _, edit := range e.opts.config {
		edit(&cfg)
	}
	if len(e.mocks) > 0 {
		cfg.Middleware = append(cfg.Middleware[:len(cfg.Middleware):len(cfg.Middleware)], e.mocks.middleware())
		if cfg.Effects == nil {
			reg, err := e.mocks.registry()
			if err != nil {
				return err
			}
			cfg.Effects = reg
		}
	}
	rt, err := loom.New(cfg)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.rt, e.proc = rt, proc
	e.mu.Unlock()
	return nil
}

// Runtime is the runtime of the running process. Restart replaces it, so
// call Runtime again after a Restart rather than keeping the old one.
func (e *Env) Runtime() *loom.Runtime {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rt
}

// process is the running process's crash wrapper.
func (e *Env) process() *crashStore {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc
}

// Events is the durable event log, as every process shares it: reading it
// shows what survives a crash. Writing to it bypasses the runtime; a test
// that does so tests the store, not its flows.
func (e *Env) Events() store.EventStore { return e.events }

// Timers is the durable timer store.
func (e *Env) Timers() store.TimerStore { return e.timers }

// Snapshots is the snapshot store.
func (e *Env) Snapshots() store.SnapshotStore { return e.snapshots }

// Branches is the branch registry.
func (e *Env) Branches() store.BranchRegistry { return e.branches }

// Clock is the runtime's clock.
func (e *Env) Clock() *Clock { return e.clock }

// Context returns a context for calls into the runtime: the test's
// context, bounded by the Env's wait timeout and the test's deadline.
// Cancel it when done.
func (e *Env) Context(t testing.TB) (context.Context, context.CancelFunc) {
	t.Helper()
	d := e.opts.waitTimeout
	if dl, ok := deadlineOf(t); ok {
		// Leave the test time to report: a wait that fails at the test's
		// own deadline dies unreported.
		if left := time.Until(dl) * 9 / 10; left < d {
			d = max(left, time.Millisecond)
		}
	}
	return context.WithTimeout(t.Context(), d)
}

// deadlineOf is the test's deadline, when t is a *testing.T (or anything
// else that has one).
func deadlineOf(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// Start starts flowID with input and returns the execution id once
// EXECUTION_STARTED is durable; a refusal fails t.
func (e *Env) Start(t testing.TB, flowID string, input any, opts ...loom.StartOption) string {
	t.Helper()
	ctx, cancel := e.Context(t)
	defer cancel()
	id, err := e.Runtime().Start(ctx, flowID, input, opts...)
	if err != nil {
		t.Fatalf("loomtest: starting %s: %v", flowID, err)
	}
	return id
}

// Answer resumes execution id's gate with answer (encoded as JSON; a
// json.RawMessage is sent as it is); a refusal fails t.
func (e *Env) Answer(t testing.TB, id, gate string, answer any) {
	t.Helper()
	raw, ok := answer.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(answer); err != nil {
			t.Fatalf("loomtest: encoding the answer to %s: %v", gate, err)
		}
	}
	ctx, cancel := e.Context(t)
	defer cancel()
	if err := e.Runtime().Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: raw}); err != nil {
		t.Fatalf("loomtest: answering %s of %s: %v", gate, id, err)
	}
}

// Log returns execution id's log as the durable store holds it now.
func (e *Env) Log(t testing.TB, id string) []event.Envelope {
	t.Helper()
	ctx, cancel := e.Context(t)
	defer cancel()
	evs, err := store.Read(ctx, e.events, id)
	if err != nil {
		t.Fatalf("loomtest: reading the log of %s: %v", id, err)
	}
	return evs
}

// idSource mints loomtest-0001, loomtest-0002…: execution ids (without
// WithExecutionID) and event ids, the same on every run of a test that
// starts its executions in the same order. It outlives Restart, so ids stay
// unique across processes.
type idSource struct {
	mu sync.Mutex
	n  int
}

func (s *idSource) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("loomtest-%04d", s.n)
}
