package loomtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// ErrCrashed is what every write through a crashed process's event store
// returns: the append CrashAtNextAppend armed, and everything after it
// until Restart. The runtime reports it wrapped (a *loom.JournalError, a
// *loom.DriveAbortedError), so match it with errors.Is.
var ErrCrashed = errors.New("loomtest: process crashed")

// errNoCapability refuses an optional capability the inner store lacks.
var errNoCapability = errors.New("loomtest: the event store lacks this capability")

// innerStore is what the crash wrapper needs of the durable event store:
// every capability the runtime looks for, so a test runs the kernel as
// production does (fencing, ranges, subscriptions, forks, the status
// index). memstore and plugins/sqlite provide them all.
type innerStore interface {
	store.EventStore
	store.Subscriber
	store.RangeReader
	store.PrefixCopier
	store.Fencer
	store.StatusIndex
}

// Interface checks: the wrapper offers what innerStore has, and no more.
// It leaves out store.ExecutionDeleter, a write path no crash test needs.
var _ innerStore = (*crashStore)(nil)

// crashStore is one process's view of the durable event store: it
// forwards everything until the process dies. A crash armed with arm
// kills the process at the next write (Append, AppendFenced, CopyPrefix,
// AcquireFence): that write reaches nothing durable and fails with
// ErrCrashed, and so does every later one. Reads keep working, since the
// log outlives the process. Writes are serialised under one lock, so "the
// next append" is exact when a journal and a gate transaction write at once.
type crashStore struct {
	inner innerStore

	mu      sync.Mutex
	armed   bool
	dead    bool
	crashed chan struct{} // closed when the process dies
}

func newCrashStore(inner innerStore) *crashStore {
	return &crashStore{inner: inner, crashed: make(chan struct{})}
}

// arm makes the next write kill the process.
func (s *crashStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

// isArmed reports whether a crash is armed and has not happened yet.
func (s *crashStore) isArmed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.armed && !s.dead
}

// kill kills the process now; killing a dead one does nothing.
func (s *crashStore) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.die()
}

// die marks the process dead; s.mu is held.
func (s *crashStore) die() {
	if !s.dead {
		s.dead = true
		close(s.crashed)
	}
}

// write runs w unless the process is dead or dies at this write.
func (s *crashStore) write(w func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed {
		s.die()
	}
	if s.dead {
		return ErrCrashed
	}
	return w()
}

func (s *crashStore) Append(ctx context.Context, executionID string, expected int64, events []event.Envelope) error {
	return s.write(func() error { return s.inner.Append(ctx, executionID, expected, events) })
}

func (s *crashStore) AppendFenced(ctx context.Context, executionID string, token, expected int64, events []event.Envelope) error {
	return s.write(func() error { return s.inner.AppendFenced(ctx, executionID, token, expected, events) })
}

func (s *crashStore) AcquireFence(ctx context.Context, executionID string) (int64, error) {
	var token int64
	err := s.write(func() (err error) {
		token, err = s.inner.AcquireFence(ctx, executionID)
		return err
	})
	return token, err
}

func (s *crashStore) CopyPrefix(ctx context.Context, from, to string, through int64) error {
	return s.write(func() error { return s.inner.CopyPrefix(ctx, from, to, through) })
}

func (s *crashStore) ReadFrom(ctx context.Context, executionID string, from int64) ([]event.Envelope, error) {
	return s.inner.ReadFrom(ctx, executionID, from)
}

func (s *crashStore) ReadRange(ctx context.Context, executionID string, from, to int64) ([]event.Envelope, error) {
	return s.inner.ReadRange(ctx, executionID, from, to)
}

func (s *crashStore) ListExecutions(ctx context.Context, after string, limit int) (store.ExecutionPage, error) {
	return s.inner.ListExecutions(ctx, after, limit)
}

func (s *crashStore) ListUnfinished(ctx context.Context, after string, limit int) (store.UnfinishedPage, error) {
	return s.inner.ListUnfinished(ctx, after, limit)
}

func (s *crashStore) Subscribe(ctx context.Context, executionID string, from int64) (*store.Subscription, error) {
	return s.inner.Subscribe(ctx, executionID, from)
}

// Close does not close the durable store: the next process opens on it.
// The Env closes the inner store when the test ends.
func (s *crashStore) Close() error { return nil }

// asInner checks that an event store offers every capability the crash
// wrapper forwards.
func asInner(s store.EventStore) (innerStore, error) {
	in, ok := s.(innerStore)
	if !ok {
		return nil, fmt.Errorf("%w: %T must implement store.Subscriber, RangeReader, PrefixCopier, Fencer and StatusIndex", errNoCapability, s)
	}
	return in, nil
}

// CrashAtNextAppend arms a crash of the running process: its next write to
// the event log (an append of the journal's tail, a gate's answer, a
// start) writes nothing and fails with ErrCrashed, as if the process died
// just before it, and so does every write after it. What the log held
// before, everything acknowledged, stays. Restart then opens the next
// process. Arming it again before a Restart does nothing more.
func (e *Env) CrashAtNextAppend() { e.process().arm() }

// Crashed reports whether the running process has crashed (an armed crash
// happened); Restart starts a live one.
func (e *Env) Crashed() bool {
	select {
	case <-e.process().crashed:
		return true
	default:
		return false
	}
}

// WaitForCrash waits until the running process has crashed: the crash a
// mock armed while its step ran (CrashAtNextAppend from inside the effect)
// has happened. It fails t when no crash comes within the wait's bound.
func (e *Env) WaitForCrash(t testing.TB) {
	t.Helper()
	ctx, cancel := e.Context(t)
	defer cancel()
	select {
	case <-e.process().crashed:
	case <-ctx.Done():
		t.Fatalf("loomtest: waiting for the process to crash: %v (armed: %t)", timedOut(ctx), e.process().isArmed())
	}
}

// Restart ends the running process as a crash does and starts the next one
// on the same stores, then recovers: it waits for an armed crash to happen
// (failing t if no append comes within the wait's bound), kills the process
// if it is still alive (so nothing more it does is written), closes its
// runtime, opens a new runtime with the same flows, clock, mocks and
// config, and runs Runtime.Recover, returning how many executions it
// re-drove. Completed steps are then served from the log, so their mocks
// are not called again; a step whose outcome the crash lost runs again (or,
// if non-idempotent, parks in doubt).
func (e *Env) Restart(t testing.TB) int {
	t.Helper()
	proc := e.process()
	ctx, cancel := e.Context(t)
	defer cancel()
	if proc.isArmed() {
		select {
		case <-proc.crashed:
		case <-ctx.Done():
			t.Fatalf("loomtest: Restart: the crash armed with CrashAtNextAppend never happened: no append came (%v)", timedOut(ctx))
		}
	}
	proc.kill()
	if err := e.Runtime().Close(); err != nil {
		t.Fatalf("loomtest: Restart: closing the crashed runtime: %v", err)
	}
	if err := e.open(); err != nil {
		t.Fatalf("loomtest: Restart: building the next runtime: %v", err)
	}
	n, err := e.Runtime().Recover(ctx)
	if err != nil {
		t.Fatalf("loomtest: Restart: recovering: %v", err)
	}
	return n
}
