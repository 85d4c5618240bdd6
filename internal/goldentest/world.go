package goldentest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// worldTimeout bounds one world's drives: a bound on a hang, not a
// measurement.
const worldTimeout = 20 * time.Second

// clock is the injected clock: it stands still while a drive runs and
// moves only to the instant of each action, so a log's timestamps depend
// on the scenario, never on how often the kernel reads the clock.
type clock struct {
	mu sync.Mutex
	ms int64
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.UnixMilli(c.ms).UTC()
}

func (c *clock) set(ms int64) {
	c.mu.Lock()
	c.ms = ms
	c.mu.Unlock()
}

// ids mints the envelope ids ev-0001, ev-0002… Each process (each Runtime)
// continues from the last id in the log it opens on, so the ids a process
// writes are decided by the log alone.
type ids struct {
	mu sync.Mutex
	n  int
}

func idsAfter(last string) (*ids, error) {
	if last == "" {
		return &ids{}, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(last, "ev-"))
	if err != nil || !strings.HasPrefix(last, "ev-") {
		return nil, fmt.Errorf("event id %q was not minted by the golden id generator", last)
	}
	return &ids{n: n}, nil
}

func (g *ids) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return fmt.Sprintf("ev-%04d", g.n)
}

// World is the durable world of one replay: the memory stores every process
// of the scenario shares, the clock, the flow's Env, and the process
// (Runtime) running now. It is driven from one goroutine.
type World struct {
	t      testing.TB
	ctx    context.Context
	flow   FlowFunc
	flowID string
	config func(*loom.Config)
	env    *Env
	id     string
	events *memstore.EventStore
	snaps  *memstore.SnapshotStore
	timers *memstore.TimerStore
	clock  *clock
	rt     *loom.Runtime
	// handed says the world began with a recorded prefix and no action has
	// been performed on it yet.
	handed bool
}

// NewWorld opens a world for execution id on fresh stores holding prefix
// (a recorded log's first events, or none) and starts its first process:
// flow registered, config applied over the harness's settings (memory
// stores, no background timer poller, sticky parks off so every resume
// re-runs the flow from the top and serves earlier steps from the log).
// The world is closed when the test ends; a failure to open fails it.
func NewWorld(t testing.TB, flow FlowFunc, config func(*loom.Config), id string, prefix []event.Envelope) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), worldTimeout)
	t.Cleanup(cancel)
	w := &World{t: t, ctx: ctx, flow: flow, config: config, env: NewEnv(), id: id,
		events: memstore.NewEventStore(), snaps: memstore.NewSnapshotStore(), timers: memstore.NewTimerStore(),
		clock: &clock{}, handed: len(prefix) > 0}
	t.Cleanup(w.Close) // a test that fails midway leaves no runtime behind
	if len(prefix) > 0 {
		if err := w.events.Append(ctx, id, 0, prefix); err != nil {
			t.Fatal(err)
		}
		w.clock.set(prefix[len(prefix)-1].Timestamp)
	}
	w.open()
	return w
}

// open starts a process on the world's stores.
func (w *World) open() {
	w.t.Helper()
	log := w.Log()
	last := ""
	if len(log) > 0 {
		last = log[len(log)-1].ID
	}
	ids, err := idsAfter(last)
	if err != nil {
		w.t.Fatal(err)
	}
	flow := w.flow(w.env)
	w.flowID = flow.ID
	cfg := loom.Config{Events: w.events, Snapshots: w.snaps, Timers: w.timers, TimerPoll: -1,
		Flows: append([]*loom.Flow{flow}, w.env.extraFlows()...), Clock: w.clock, NewID: ids.next, NodeID: "golden-node", StickyParks: -1,
		Recovery: loom.Recovery{Disabled: true}, // a scenario recovers by hand, at its recorded point
		Logger:   slog.New(slog.DiscardHandler)}
	if w.config != nil {
		w.config(&cfg)
	}
	if w.rt, err = loom.New(cfg); err != nil {
		w.t.Fatal(err)
	}
}

// Close stops the running process, if any; the stores stay.
func (w *World) Close() {
	if w.rt != nil {
		_ = w.rt.Close() // Close reports nothing but success
		w.rt = nil
	}
}

// Env is the world's Env: what the flow's effects and deciders did in
// every process of the world so far.
func (w *World) Env() *Env { return w.env }

// Log is the execution's log as the event store holds it now.
func (w *World) Log() []event.Envelope {
	w.t.Helper()
	evs, err := store.Read(w.ctx, w.events, w.id)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

// Perform does a at its instant (a.At) and waits until the drive it began
// parks or ends, returning the state then and the error of the call (the
// test decides whether a refusal is expected). When a.Crash names a step,
// the process is killed while that step's effect runs and another starts
// on the same stores. The first action on a world handed a recorded prefix
// finds no timer of that prefix in the fresh timer store, so a timer
// action is delivered as the poller delivers it: a TIMER_FIRED resume.
func (w *World) Perform(a Action) (fold.State, error) {
	first := w.handed
	w.handed = false
	w.clock.set(a.At)
	var crashed <-chan struct{}
	if a.Crash != "" {
		crashed = w.env.armCrash(a.Crash)
	}
	var err error
	switch a.Kind {
	case ActStart:
		_, err = w.rt.Start(w.ctx, w.flowID, a.Input, loom.WithExecutionID(w.id))
	case ActResume:
		err = w.rt.Resume(w.ctx, w.id, loom.ResumeEvent{EventType: a.EventType, Payload: a.Payload})
	case ActResumeAs:
		err = w.rt.ResumeAs(w.ctx, w.id, loom.ResumeEvent{EventType: a.EventType, Payload: a.Payload}, loom.OntoFlow(a.Flow))
	case ActTimer:
		if first {
			err = w.rt.Resume(w.ctx, w.id, loom.ResumeEvent{EventType: event.TimerFired, Payload: mustJSON(map[string]int64{"wakeAt": a.WakeAt})})
			break
		}
		var n int
		if n, err = w.rt.FireDueTimers(w.ctx); err == nil && n != 1 {
			err = fmt.Errorf("the timer poll (FireDueTimers) at %d fired %d timers, want the park's one", a.At, n)
		}
	case ActRecover:
		var n int
		if n, err = w.rt.Recover(w.ctx); err == nil && n != 1 {
			err = fmt.Errorf("the recovery (Recover) re-drove %d executions, want 1", n)
		}
	case ActVerdict:
		err = w.rt.ResolveInDoubt(w.ctx, w.id, a.Verdict)
	default:
		err = fmt.Errorf("unknown action kind %q", a.Kind)
	}
	if err != nil {
		return fold.State{}, err
	}
	if crashed != nil {
		select {
		case <-crashed:
		case <-w.ctx.Done():
			return fold.State{}, fmt.Errorf("step %s never ran, so the process could not die in it", a.Crash)
		}
		w.Close() // the process dies with the effect running
		w.open()  // and another one starts on the same stores
		return w.rt.LoadState(w.ctx, w.id)
	}
	return w.rt.WaitForSettled(w.ctx, w.id)
}

// Finish waits for the last drive to end and closes the process. An
// execution that ended (completed or failed) must leave no timer behind:
// a fired one is deleted, one an answer made pointless is dropped.
func (w *World) Finish() {
	w.t.Helper()
	st, err := w.rt.LoadState(w.ctx, w.id)
	if err != nil {
		w.t.Fatal(err)
	}
	if st.Status.Terminal() {
		var failed *loom.FlowFailedError
		if _, err := w.rt.WaitForCompletion(w.ctx, w.id); err != nil && !errors.As(err, &failed) {
			w.t.Fatal(err)
		}
	}
	w.Close()
	if left, err := w.timers.Due(w.ctx, math.MaxInt64, 10); err != nil || (st.Status.Terminal() && len(left) > 0) {
		w.t.Errorf("the execution ended %s and left timers %+v behind (%v)", st.Status, left, err)
	}
}
