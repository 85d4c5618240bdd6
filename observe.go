package loom

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Seeing a runtime from outside: two event hooks (OnEvent at commit,
// OnDurableEvent once the log holds the event, ADR 0147) and the Observer
// seam the telemetry package implements with OpenTelemetry. All of it is
// opt-in: unwired, no hook code runs and no span or metric is made.

// Observer is the kernel's telemetry seam: it brackets drives, step
// attempts, caller-facing operations and durable append batches, and hears
// timer firings and lease take-overs. The telemetry package implements it
// with OpenTelemetry; Config.Observer is nil by default, and then the
// kernel calls none of it. Every method is called on the kernel's hot
// path: it must return quickly and never call back into the runtime.
type Observer interface {
	// Operation brackets a caller-facing operation (start, resume, cancel,
	// send, fork, resume-as, resolve) from its call to its durable commit
	// or refusal; the context it returns is the operation's, and the drive
	// the operation starts, if any, is begun from it.
	Operation(ctx context.Context, op Operation) (context.Context, func(error))
	// Drive brackets one drive of an execution, from its launch to its park,
	// end or abort. ctx is the drive's own (the runtime's, cancelled by
	// Close); the context returned must derive from it.
	Drive(ctx context.Context, d DriveInfo) (context.Context, func(DriveEnd))
	// StepAttempt brackets one live attempt of a step's effect; the
	// context it returns (derived from ctx) is the attempt's.
	StepAttempt(ctx context.Context, s StepAttempt) (context.Context, func(error))
	// Append brackets one durable append batch of an execution's journal.
	Append(ctx context.Context, executionID string, events int) func(error)
	// TimerFired hears a durable timer fire, lag after its WakeAt.
	TimerFired(ctx context.Context, key string, lag time.Duration)
	// LeaseTakenOver hears this node take an execution's lease over from
	// another owner whose lease lapsed.
	LeaseTakenOver(ctx context.Context, executionID, from string)
	// TraceContext renders ctx's trace context as the carrier the kernel
	// records in the metadata of the operation's first event (member
	// "trace"), so a resume or a recovery on another node continues the
	// trace; nil records nothing.
	TraceContext(ctx context.Context) map[string]string
}

// Operation is a caller-facing operation an Observer brackets.
type Operation struct {
	// Name is "start", "resume", "cancel", "send", "fork", "resume-as" or
	// "resolve".
	Name        string
	ExecutionID string
	FlowID      string // "" where the operation does not name one
}

// DriveInfo describes a drive to Observer.Drive.
type DriveInfo struct {
	ExecutionID string
	FlowID      string
	Simulated   bool
	// Operation is the context of the operation that launched the drive
	// (a start, a resume…; the runtime's own for a recovery or a timer):
	// where the caller's trace is.
	Operation context.Context
	// Trace reads the trace carrier recorded when the execution started
	// (nil if none): the drive of a resume or a recovery on another node
	// continues that trace. It reads the store, so an Observer calls it
	// only when ctx carries no trace of its own.
	Trace func() map[string]string
}

// DriveEnd is how a drive ended: Status is suspended, completed, failed,
// cancelled or continued; it is "" for an aborted drive, whose Err says
// why.
type DriveEnd struct {
	Status fold.Status
	Err    error
}

// StepAttempt describes one attempt to Observer.StepAttempt. No payload
// is passed: what a span may carry is the Observer's policy.
type StepAttempt struct {
	ExecutionID string
	StepID      string
	ToolID      string
	Kind        string
	Attempt     int64
}

// traceMeta is the metadata member a trace carrier is recorded under.
const traceMeta = "trace"

// withTrace adds ctx's trace carrier to meta under "trace" (a new map;
// meta is not changed), or returns meta as it is when no Observer is
// wired or ctx has no trace.
func (rt *Runtime) withTrace(ctx context.Context, meta map[string]json.RawMessage) map[string]json.RawMessage {
	if rt.cfg.Observer == nil {
		return meta
	}
	carrier := rt.cfg.Observer.TraceContext(ctx)
	if len(carrier) == 0 {
		return meta
	}
	raw, err := json.Marshal(carrier)
	if err != nil {
		return meta
	}
	out := make(map[string]json.RawMessage, len(meta)+1)
	for k, v := range meta { //loom:order-independent map into map
		out[k] = v
	}
	out[traceMeta] = raw
	return out
}

// startedTrace reads the trace carrier recorded on an execution's first
// event, or nil.
func (rt *Runtime) startedTrace(id string) map[string]string {
	evs, err := store.ReadRange(context.Background(), rt.cfg.Events, id, 0, 1)
	if err != nil || len(evs) == 0 {
		return nil
	}
	raw, ok := evs[0].Metadata[traceMeta]
	if !ok {
		return nil
	}
	var carrier map[string]string
	if json.Unmarshal(raw, &carrier) != nil {
		rt.cfg.Logger.Warn("loom: the recorded trace context does not parse; the drive starts a new trace", "execution", id)
		return nil
	}
	return carrier
}

// operation brackets a caller-facing operation when an Observer is wired.
func (rt *Runtime) operation(ctx context.Context, name, id, flowID string) (context.Context, func(error)) {
	if rt.cfg.Observer == nil {
		return ctx, func(error) {}
	}
	return rt.cfg.Observer.Operation(ctx, Operation{Name: name, ExecutionID: id, FlowID: flowID})
}

// durablePump hands durable events to Config.OnDurableEvent on one
// goroutine of its own, in the order the journals made them durable, so a
// slow, blocking or panicking hook never stalls a journal's tail. Its
// queue is bounded: when a hook falls behind by more than the bound, the
// events that do not fit are dropped and counted (at most once, ADR 0147),
// never held against the log.
type durablePump struct {
	hook   func(event.Envelope)
	bound  int
	warn   func(msg string, args ...any)
	mu     sync.Mutex
	queue  []event.Envelope
	closed bool
	// dropped counts events never delivered; dropping says the last push
	// dropped (so a run of drops is logged once).
	dropped  int64
	dropping bool
	wake     chan struct{}
	done     chan struct{}
}

func newDurablePump(hook func(event.Envelope), bound int, warn func(string, ...any)) *durablePump {
	p := &durablePump{hook: hook, bound: bound, warn: warn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go p.run()
	return p
}

// push queues a durable batch; it never blocks on the hook.
func (p *durablePump) push(batch []event.Envelope) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	room := max(p.bound-len(p.queue), 0)
	take := min(room, len(batch))
	p.queue = append(p.queue, batch[:take]...)
	startsDropping := false
	lost := len(batch) - take
	if lost > 0 {
		p.dropped += int64(lost)
		startsDropping, p.dropping = !p.dropping, true
	} else {
		p.dropping = false
	}
	dropped := p.dropped
	p.mu.Unlock()
	if startsDropping {
		p.warn("loom: OnDurableEvent is behind; durable events are dropped until it catches up",
			"bound", p.bound, "droppedSoFar", dropped, "execution", batch[take].ExecutionID, "sequence", batch[take].Sequence)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *durablePump) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		batch, closed := p.queue, p.closed
		p.queue = nil
		p.mu.Unlock()
		for _, e := range batch {
			p.deliver(e)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-p.wake
	}
}

func (p *durablePump) deliver(e event.Envelope) {
	defer func() {
		if v := recover(); v != nil {
			p.warn("loom: OnDurableEvent panicked; the event is dropped and the runtime goes on",
				"execution", e.ExecutionID, "sequence", e.Sequence, "panic", fmt.Sprint(v))
		}
	}()
	p.hook(e)
}

// close delivers what is queued and stops; it returns once the hook has
// seen the last queued event.
func (p *durablePump) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
}

// Dropped counts the durable events never handed to OnDurableEvent because
// it fell more than Config.EventHookBuffer events behind.
func (rt *Runtime) DroppedDurableEvents() int64 {
	if rt.pump == nil {
		return 0
	}
	rt.pump.mu.Lock()
	defer rt.pump.mu.Unlock()
	return rt.pump.dropped
}
