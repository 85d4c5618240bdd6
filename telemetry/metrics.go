package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// Metric attribute keys beyond the span ones.
const (
	keyOutcome    = attribute.Key("loom.outcome")
	keyTimerKind  = attribute.Key("loom.timer.kind")
	keyQueue      = attribute.Key("loom.queue")
	keyQueueState = attribute.Key("loom.queue.state")
)

// Limits.
const (
	// MaxAttributeValues bounds the distinct values one metric attribute
	// (loom.flow.id, loom.step.kind, loom.timer.kind) takes per Telemetry:
	// past it, new values are reported as "other", so a flow registry or a
	// timer prefix scheme that grows never grows the metric series without
	// bound.
	MaxAttributeValues = 256
	// MaxTrackedParks bounds the parked executions a Telemetry remembers
	// to subtract a cancellation of a parked execution from
	// loom.executions.parked; past it, such a cancellation is not
	// subtracted.
	MaxTrackedParks = 1 << 16
)

// Histogram bucket boundaries.
var (
	// latencyBuckets (seconds) span a memory append to a slow model call.
	latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
		0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	// batchBuckets count events per append batch.
	batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
)

// instruments are a Telemetry's instruments and the attribute options it
// builds once per value, so a measurement allocates no attribute set.
type instruments struct {
	started, completed, failed, cancelled, continued metric.Int64Counter
	suspended, resumed, retries                      metric.Int64Counter
	parked                                           metric.Int64UpDownCounter
	stepAttempts                                     metric.Int64Counter
	stepDuration, appendDuration, timerLag           metric.Float64Histogram
	appendEvents                                     metric.Int64Histogram
	takeovers, drives                                metric.Int64Counter
	queueDepth, statuses                             metric.Int64ObservableGauge

	flows  attrCache[[]metric.AddOption]
	kinds  attrCache[*outcomeOptions]
	timers attrCache[[]metric.RecordOption]
	// driveOutcomes by DriveEnd.Status; "" is an aborted drive.
	driveOutcomes map[fold.Status][]metric.AddOption
	appendOutcome *outcomeOptions
}

// outcomeOptions are one attribute set's options with loom.outcome ok and
// error.
type outcomeOptions struct {
	addOK, addErr []metric.AddOption
	recOK, recErr []metric.RecordOption
}

func newOutcomeOptions(kvs ...attribute.KeyValue) *outcomeOptions {
	ok := metric.WithAttributeSet(attribute.NewSet(append(kvs, keyOutcome.String("ok"))...))
	bad := metric.WithAttributeSet(attribute.NewSet(append(kvs, keyOutcome.String("error"))...))
	return &outcomeOptions{addOK: []metric.AddOption{ok}, addErr: []metric.AddOption{bad},
		recOK: []metric.RecordOption{ok}, recErr: []metric.RecordOption{bad}}
}

func (o *outcomeOptions) add(failed bool) []metric.AddOption {
	if failed {
		return o.addErr
	}
	return o.addOK
}

func (o *outcomeOptions) record(failed bool) []metric.RecordOption {
	if failed {
		return o.recErr
	}
	return o.recOK
}

func (m *instruments) init(meter metric.Meter) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return h
	}
	m.started = counter("loom.executions.started", "{execution}", "Executions started (EXECUTION_STARTED made durable).")
	m.completed = counter("loom.executions.completed", "{execution}", "Executions completed (EXECUTION_COMPLETED made durable).")
	m.failed = counter("loom.executions.failed", "{execution}", "Executions failed (EXECUTION_FAILED made durable).")
	m.cancelled = counter("loom.executions.cancelled", "{execution}", "Executions cancelled (EXECUTION_CANCELLED made durable).")
	m.continued = counter("loom.executions.continued", "{execution}", "Executions continued as new (EXECUTION_CONTINUED made durable).")
	m.suspended = counter("loom.executions.suspended", "{execution}", "Parks (EXECUTION_SUSPENDED made durable).")
	m.resumed = counter("loom.executions.resumed", "{execution}", "Resumes (EXECUTION_RESUMED made durable).")
	m.retries = counter("loom.step.retries", "{retry}", "Step retries (STEP_RETRYING made durable).")
	var err error
	m.parked, err = meter.Int64UpDownCounter("loom.executions.parked", metric.WithUnit("{execution}"),
		metric.WithDescription("Parked executions, as this node's transitions: +1 a park, -1 a resume or the cancellation of one it saw park."))
	errs = append(errs, err)
	m.stepAttempts = counter("loom.step.attempts", "{attempt}", "Live step attempts, by kind and outcome.")
	m.stepDuration = seconds("loom.step.duration", "Duration of one live step attempt, by kind and outcome.")
	m.appendDuration = seconds("loom.journal.append.duration", "Duration of one durable journal append batch.")
	m.timerLag = seconds("loom.timer.lag", "How late a durable timer fired after its wake time.")
	m.appendEvents, err = meter.Int64Histogram("loom.journal.append.events", metric.WithUnit("{event}"),
		metric.WithDescription("Events per durable journal append batch."), metric.WithExplicitBucketBoundaries(batchBuckets...))
	errs = append(errs, err)
	m.takeovers = counter("loom.lease.takeovers", "{takeover}", "Leases this node took over from an owner whose lease lapsed.")
	m.drives = counter("loom.drives", "{drive}", "Drives ended, by outcome (the status they ended in, or aborted).")
	m.queueDepth, err = meter.Int64ObservableGauge("loom.queue.depth", metric.WithUnit("{item}"),
		metric.WithDescription("Queue items by state, for the queues given to ObserveQueue."))
	errs = append(errs, err)
	m.statuses, err = meter.Int64ObservableGauge("loom.executions.by_status", metric.WithUnit("{execution}"),
		metric.WithDescription("Executions by status, as the function given to ObserveStatuses counts them."))
	errs = append(errs, err)

	m.flows.init(func(flow string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyFlow.String(flow)))}
	})
	m.kinds.init(func(kind string) *outcomeOptions { return newOutcomeOptions(keyKind.String(kind)) })
	m.timers.init(func(kind string) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(keyTimerKind.String(kind)))}
	})
	m.driveOutcomes = map[fold.Status][]metric.AddOption{}
	for _, s := range []fold.Status{fold.StatusSuspended, fold.StatusCompleted, fold.StatusFailed,
		fold.StatusCancelled, fold.StatusContinued, ""} {
		name := string(s)
		if s == "" {
			name = "aborted"
		}
		m.driveOutcomes[s] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyOutcome.String(name)))}
	}
	m.appendOutcome = newOutcomeOptions()
	return errors.Join(errs...)
}

func (m *instruments) drive(end loom.DriveEnd) {
	opts, ok := m.driveOutcomes[end.Status]
	if !ok || end.Err != nil {
		opts = m.driveOutcomes[""]
	}
	m.drives.Add(context.Background(), 1, opts...)
}

func (m *instruments) step(ctx context.Context, kind string, failed bool, d time.Duration) {
	o := m.kinds.get(kind)
	m.stepAttempts.Add(ctx, 1, o.add(failed)...)
	m.stepDuration.Record(ctx, d.Seconds(), o.record(failed)...)
}

func (m *instruments) append(ctx context.Context, events int, failed bool, d time.Duration) {
	m.appendDuration.Record(ctx, d.Seconds(), m.appendOutcome.record(failed)...)
	m.appendEvents.Record(ctx, int64(events), m.appendOutcome.record(failed)...)
}

// timer records a timer's lag under its key's prefix ("park" for the
// runtime's own park timers, a schedule's prefix…).
func (m *instruments) timer(ctx context.Context, key string, lag time.Duration) {
	kind, _, _ := strings.Cut(key, ":")
	m.timerLag.Record(ctx, max(lag, 0).Seconds(), m.timers.get(kind)...)
}

// OnDurableEvent counts one durable event into the execution metrics (see
// the package doc's table). Wire installs it as Config.OnDurableEvent; call
// it yourself only from a hook of your own that Wire does not chain. It
// reads an event's type, workflow and execution id, never its payload, and
// recovers its own panics.
func (t *Telemetry) OnDurableEvent(e event.Envelope) {
	defer func() {
		if v := recover(); v != nil {
			t.log.Warn("telemetry: counting a durable event panicked; it is not counted",
				"execution", e.ExecutionID, "sequence", e.Sequence, "panic", fmt.Sprint(v))
		}
	}()
	ctx := context.Background()
	var c metric.Int64Counter
	switch e.Type {
	case event.ExecutionStarted:
		c = t.m.started
	case event.ExecutionSuspended:
		t.m.parked.Add(ctx, 1, t.m.flows.get(e.WorkflowID)...)
		t.parked.park(e.ExecutionID)
		c = t.m.suspended
	case event.ExecutionResumed:
		t.m.parked.Add(ctx, -1, t.m.flows.get(e.WorkflowID)...)
		t.parked.unpark(e.ExecutionID)
		c = t.m.resumed
	case event.ExecutionCompleted:
		c = t.m.completed
	case event.ExecutionFailed:
		c = t.m.failed
	case event.ExecutionCancelled:
		c = t.m.cancelled
	case event.ExecutionContinued:
		c = t.m.continued
	case event.StepRetrying:
		c = t.m.retries
	default:
		return
	}
	opts := t.m.flows.get(e.WorkflowID)
	switch e.Type {
	case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled, event.ExecutionContinued:
		// An execution that ends while parked (a cancel) leaves the park.
		if t.parked.unpark(e.ExecutionID) {
			t.m.parked.Add(ctx, -1, opts...)
		}
	}
	c.Add(ctx, 1, opts...)
}

// ObserveQueue reports depth's answer as the gauge loom.queue.depth with
// loom.queue=name and loom.queue.state ready, claimed and done, at every
// collection (on the metric reader's goroutine, never the kernel's). A
// depth that fails or panics is logged and skipped for that collection.
// Unregister the returned registration to stop.
func (t *Telemetry) ObserveQueue(name string, depth func(ctx context.Context) (store.QueueDepth, error)) (metric.Registration, error) {
	state := func(s string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(keyQueue.String(name), keyQueueState.String(s)))
	}
	ready, claimed, done := state("ready"), state("claimed"), state("done")
	return t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var d store.QueueDepth
		if !t.collect(func() (err error) { d, err = depth(ctx); return err }, "queue depth", "queue", name) {
			return nil
		}
		o.ObserveInt64(t.m.queueDepth, int64(d.Ready), ready)
		o.ObserveInt64(t.m.queueDepth, int64(d.Claimed), claimed)
		o.ObserveInt64(t.m.queueDepth, int64(d.Done), done)
		return nil
	}, t.m.queueDepth)
}

// ObserveStatuses reports counts's answer (executions by status name) as
// the gauge loom.executions.by_status with loom.status, at every
// collection; counts should be cheap or cached (it runs on the reader's
// goroutine). A counts that fails or panics is logged and skipped. At most
// MaxAttributeValues statuses are reported.
func (t *Telemetry) ObserveStatuses(counts func(ctx context.Context) (map[string]int64, error)) (metric.Registration, error) {
	var (
		mu   sync.Mutex
		opts = map[string]metric.ObserveOption{}
	)
	option := func(status string) (metric.ObserveOption, bool) {
		mu.Lock()
		defer mu.Unlock()
		o, ok := opts[status]
		if !ok && len(opts) < MaxAttributeValues {
			o, ok = metric.WithAttributeSet(attribute.NewSet(keyStatus.String(status))), true
			opts[status] = o
		}
		return o, ok
	}
	return t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		var byStatus map[string]int64
		if !t.collect(func() (err error) { byStatus, err = counts(ctx); return err }, "execution statuses") {
			return nil
		}
		for status, n := range byStatus { //loom:order-independent each observation stands alone
			if opt, ok := option(status); ok {
				o.ObserveInt64(t.m.statuses, n, opt)
			}
		}
		return nil
	}, t.m.statuses)
}

// collect runs an app's observation function, logging its error or panic;
// it reports whether fn succeeded.
func (t *Telemetry) collect(fn func() error, what string, args ...any) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			t.log.Warn("telemetry: "+what+" panicked; skipped for this collection", append(args, "panic", fmt.Sprint(v))...)
			ok = false
		}
	}()
	if err := fn(); err != nil {
		t.log.Warn("telemetry: "+what+" failed; skipped for this collection", append(args, "error", err)...)
		return false
	}
	return true
}

// attrCache keeps the options built for each value of one attribute, at
// most MaxAttributeValues of them; later values share the "other" entry.
type attrCache[V any] struct {
	// last is the entry of the value asked for last: most runtimes ask for
	// the same step kind, flow or timer prefix again and again.
	last  atomic.Pointer[attrEntry[V]]
	m     sync.Map // string -> *attrEntry[V]
	mu    sync.Mutex
	n     int
	build func(string) V
	other V
}

func (c *attrCache[V]) init(build func(string) V) {
	c.build, c.other = build, build("other")
}

type attrEntry[V any] struct {
	value string
	v     V
}

func (c *attrCache[V]) get(value string) V {
	if e := c.last.Load(); e != nil && e.value == value {
		return e.v
	}
	if e, ok := c.m.Load(value); ok {
		c.last.Store(e.(*attrEntry[V]))
		return e.(*attrEntry[V]).v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m.Load(value); ok {
		return e.(*attrEntry[V]).v
	}
	if c.n >= MaxAttributeValues {
		return c.other
	}
	e := &attrEntry[V]{value, c.build(value)}
	c.m.Store(value, e)
	c.n++
	return e.v
}

// parkedSet remembers the executions this node saw park and not resume,
// at most MaxTrackedParks of them.
type parkedSet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (p *parkedSet) park(id string) {
	p.mu.Lock()
	if len(p.ids) < MaxTrackedParks {
		p.ids[id] = struct{}{}
	}
	p.mu.Unlock()
}

// unpark forgets id and reports whether it was remembered.
func (p *parkedSet) unpark(id string) bool {
	p.mu.Lock()
	_, ok := p.ids[id]
	delete(p.ids, id)
	p.mu.Unlock()
	return ok
}
