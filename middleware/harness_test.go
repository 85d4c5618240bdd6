package middleware_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// Flows, journal tails and waits must all end with their runtime.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is an injected clock the tests (and the effects in them) move by
// hand: the metering ring's Meter.Now and the runtime's Config.Clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rig is a runtime over a memory event store that always replays on
// resume (StickyParks: -1), so a resumed flow re-runs from the top and
// every completed step must be served from the log.
type rig struct {
	t      *testing.T
	events *memstore.EventStore
	rt     *loom.Runtime
}

func newRig(t *testing.T, cfg loom.Config, flows ...*loom.Flow) *rig {
	t.Helper()
	r := &rig{t: t, events: memstore.NewEventStore()}
	cfg.Events, cfg.Flows = r.events, flows
	if cfg.StickyParks == 0 {
		cfg.StickyParks = -1
	}
	if cfg.Clock == nil {
		cfg.Clock = newClock()
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	r.rt = rt
	return r
}

func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r.t.Cleanup(cancel)
	return ctx
}

// start starts flowID under id and waits until it parks or ends.
func (r *rig) start(flowID, id string, in any) {
	r.t.Helper()
	if _, err := r.rt.Start(r.ctx(), flowID, in, loom.WithExecutionID(id)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) parked(id string) fold.State {
	r.t.Helper()
	st, err := r.rt.WaitForSuspend(r.ctx(), id)
	if err != nil {
		r.t.Fatalf("waiting for %s to park: %v", id, err)
	}
	return st
}

// resume answers the gate "go" and waits for the execution to end.
func (r *rig) resume(id string) loom.Result {
	r.t.Helper()
	if err := r.rt.Resume(r.ctx(), id, loom.ResumeEvent{EventType: "go", Payload: json.RawMessage(`true`)}); err != nil {
		r.t.Fatal(err)
	}
	return r.done(id)
}

func (r *rig) done(id string) loom.Result {
	r.t.Helper()
	res, err := r.rt.WaitForCompletion(r.ctx(), id)
	if err != nil {
		r.t.Fatalf("waiting for %s: %v", id, err)
	}
	return res
}

func (r *rig) log(id string) []event.Envelope {
	r.t.Helper()
	evs, err := store.Read(context.Background(), r.events, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

// payloads returns the payloads of id's events of type typ, as recorded.
func (r *rig) payloads(id, typ string) []string {
	var out []string
	for _, e := range r.log(id) {
		if e.Type == typ {
			out = append(out, string(e.Payload))
		}
	}
	return out
}

// logText is every envelope of id encoded, for "never in the log" checks.
func (r *rig) logText(id string) string {
	var b strings.Builder
	for _, e := range r.log(id) {
		raw, err := event.Encode(e)
		if err != nil {
			r.t.Fatal(err)
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	return b.String()
}

func types(evs []event.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// outcome is what a gated flow saw of its step.
type outcome struct {
	mu  sync.Mutex
	out json.RawMessage
	err error
}

func (o *outcome) set(out json.RawMessage, err error) {
	o.mu.Lock()
	o.out, o.err = out, err
	o.mu.Unlock()
}

func (o *outcome) get() (json.RawMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.out, o.err
}

// gatedFlow runs task on input, parks at the gate "go", then ends with the
// step's output. What the step returned (on every run of the body, replays
// included) is kept in the returned outcome. A failed step does not fail
// the flow: it ends with the error's message, so the log ends cleanly.
func gatedFlow(id string, task *loom.Task, input any) (*loom.Flow, *outcome) {
	o := &outcome{}
	return loom.NewFlow(id, func(ctx *loom.Context, _ struct{}) (json.RawMessage, error) {
		out, err := ctx.Execute(task, input)
		o.set(out, err)
		if _, serr := loom.Suspend[bool](ctx, "go"); serr != nil {
			return nil, serr
		}
		if err != nil {
			return json.Marshal(err.Error())
		}
		return out, nil
	}), o
}

// counted is an effect.Func wrapper that counts its invocations.
type counted struct {
	n  atomic.Int64
	fn effect.Func
}

func (c *counted) Func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
	c.n.Add(1)
	return c.fn(ec, in)
}

func registry(t *testing.T, effects map[string]effect.Func) *effect.Registry {
	t.Helper()
	reg, err := effect.NewRegistry(effects)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// replayKeepsRingFacts resumes id (parked after its step), and checks the
// re-run served the step from the log: the effect was not invoked again
// and no fact of the given types was appended again.
func replayKeepsRingFacts(t *testing.T, r *rig, id string, c *counted, facts ...string) loom.Result {
	t.Helper()
	calls := c.n.Load()
	before := map[string]int{}
	for _, typ := range facts {
		before[typ] = len(r.payloads(id, typ))
	}
	res := r.resume(id)
	if n := c.n.Load(); n != calls {
		t.Fatalf("the replay invoked the effect again: %d calls, want %d", n, calls)
	}
	for _, typ := range facts {
		if n := len(r.payloads(id, typ)); n != before[typ] {
			t.Fatalf("the replay appended %s again: %d, want %d", typ, n, before[typ])
		}
	}
	return res
}
