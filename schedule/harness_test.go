package schedule

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The Scheduler's unit tests run on memstore's TimerStore, a fake clock and
// a fake Starter; runtime_test.go runs it over real runtimes.

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// fakeStarter records started ids and refuses a duplicate with
// loom.ErrExecutionExists, like a runtime; fail makes the next starts fail.
type fakeStarter struct {
	mu      sync.Mutex
	started []string // in start order
	ids     map[string]bool
	fail    error
}

func (s *fakeStarter) Start(_ context.Context, flowID string, _ any, opts ...loom.StartOption) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(opts) != 1 {
		return "", fmt.Errorf("want exactly one option, got %d", len(opts))
	}
	id := idOf(opts[0])
	if s.fail != nil {
		return "", s.fail
	}
	if s.ids[id] {
		return "", fmt.Errorf("%w: %q", loom.ErrExecutionExists, id)
	}
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	s.ids[id] = true
	s.started = append(s.started, flowID+" "+id)
	return id, nil
}

func (s *fakeStarter) Started() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.started)
}

// idOf reads the id a loom.WithExecutionID option carries. loom keeps its
// options opaque, so this test-only helper applies the option to a fresh
// value of its parameter type and reads the "id" field; it panics if loom
// changes that shape (the real-runtime test covers the option end to end).
func idOf(opt loom.StartOption) string {
	fn := reflect.ValueOf(opt)
	target := reflect.New(fn.Type().In(0).Elem())
	fn.Call([]reflect.Value{target})
	id := target.Elem().FieldByName("id")
	if !id.IsValid() || id.Kind() != reflect.String {
		panic("loom.StartOption no longer carries an id field")
	}
	return id.String()
}

type harness struct {
	t      *testing.T
	clock  *fakeClock
	rt     *fakeStarter
	timers *memstore.TimerStore
}

func newHarness(t *testing.T, now string) *harness {
	t.Helper()
	h := &harness{t: t, clock: &fakeClock{now: utc(t, now)}, rt: &fakeStarter{}, timers: memstore.NewTimerStore()}
	t.Cleanup(func() { _ = h.timers.Close() })
	return h
}

func (h *harness) scheduler(schedules ...Schedule) *Scheduler {
	h.t.Helper()
	s, err := NewScheduler(h.rt, h.timers, h.clock, schedules...)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) timer(name string) store.Timer {
	h.t.Helper()
	tm, ok, err := h.timers.Get(context.Background(), TimerKey(name))
	if err != nil || !ok {
		h.t.Fatalf("timer %q: %v, %v", name, ok, err)
	}
	return tm
}

func (h *harness) wantTimer(name, at string) {
	h.t.Helper()
	if got := h.timer(name).WakeAt; got != utc(h.t, at).UnixMilli() {
		h.t.Errorf("timer %q wakes at %s, want %s", name, time.UnixMilli(got).UTC().Format(time.RFC3339), at)
	}
	due, err := h.timers.Due(context.Background(), 1<<62, 0)
	if err != nil || len(due) != 1 {
		h.t.Errorf("%d timers stored (%v), want exactly one", len(due), err)
	}
}

func (h *harness) wantStarted(ids ...string) {
	h.t.Helper()
	if got := h.rt.Started(); !slices.Equal(got, ids) {
		h.t.Errorf("started %q, want %q", got, ids)
	}
}
