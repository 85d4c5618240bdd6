package telemetry

import (
	"errors"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

// ScopeName is the instrumentation scope of every span and instrument this
// package makes.
const ScopeName = "github.com/loom-kernel/loom/telemetry"

// Options configures New. The zero value is the documented default set:
//
//   - TracerProvider: otel.GetTracerProvider() (a no-op unless the app set one)
//   - MeterProvider: otel.GetMeterProvider() (likewise)
//   - Propagator: W3C trace context and baggage
//   - Payloads: false — no error messages on spans
//   - Logger: slog.Default()
type Options struct {
	// TracerProvider makes the spans (nil: the otel global). A
	// tracenoop.TracerProvider is recognized: no span is started at all,
	// and a context passes through as it came (its trace, if any, is still
	// recorded by the kernel and carried on to the drive).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments (nil: the otel global). A
	// metricnoop.MeterProvider is recognized: Wire then chains no hook.
	MeterProvider metric.MeterProvider
	// Propagator renders the trace carrier the kernel records in an
	// operation's first event and reads back for a drive on another node
	// (nil: W3C tracecontext and baggage, not the otel global, so the
	// recorded carrier never depends on what else the process set).
	Propagator propagation.TextMapPropagator
	// Payloads opts in to data-bearing attributes: an error's message
	// (span status description and an "exception" event). Off, a failed
	// span carries only the error's Go type and, for a typed failure, its
	// declared channel — an error message may quote inputs, secrets or
	// whole payloads. The seam never hands step inputs or outputs to an
	// Observer, so no span carries them either way.
	Payloads bool
	// Logger receives what telemetry rides out: a queue or status callback
	// that failed, a hook that panicked (nil: slog.Default()).
	Logger *slog.Logger
}

// Telemetry is the OpenTelemetry implementation of loom.Observer, plus the
// durable-event hook its execution metrics come from. Wire it into a
// loom.Config; one Telemetry may serve many runtimes. Its methods never
// block, hold no lock across a call into OpenTelemetry, and recover their
// own panics.
type Telemetry struct {
	tracer trace.Tracer
	// tracing is false for a no-op TracerProvider (tracenoop): then no span
	// call is made at all (see start).
	tracing bool
	// counting is false for a no-op MeterProvider (metricnoop): then Wire
	// chains no durable-event hook (see Wire).
	counting bool
	meter    metric.Meter
	prop     propagation.TextMapPropagator
	payloads bool
	log      *slog.Logger
	m        instruments

	// drives and ops map an execution id to the span context of its live
	// drive (and live operation): Append, called with the runtime's own
	// context, parents its span there. An entry is removed when its
	// bracket ends, if it is still that bracket's.
	drives sync.Map // string -> *trace.SpanContext
	ops    sync.Map // string -> *trace.SpanContext

	parked parkedSet
}

var _ loom.Observer = (*Telemetry)(nil)

// New builds a Telemetry from opts and creates its instruments. It fails
// only when the MeterProvider refuses an instrument.
func New(opts Options) (*Telemetry, error) {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	prop := opts.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	t := &Telemetry{
		tracer:   tp.Tracer(ScopeName),
		tracing:  !isNoopTracing(tp),
		counting: !isNoopMetering(mp),
		meter:    mp.Meter(ScopeName),
		prop:     prop,
		payloads: opts.Payloads,
		log:      log,
		parked:   parkedSet{ids: map[string]struct{}{}},
	}
	if err := t.m.init(t.meter); err != nil {
		return nil, errors.Join(errors.New("telemetry: creating instruments"), err)
	}
	return t, nil
}

// isNoopTracing recognizes the no-op TracerProvider of
// go.opentelemetry.io/otel/trace/noop.
func isNoopTracing(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return false
}

// isNoopMetering recognizes the no-op MeterProvider of
// go.opentelemetry.io/otel/metric/noop.
func isNoopMetering(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return false
}

// Wire makes cfg report to t: it sets cfg.Observer to t (replacing one
// already set) and chains cfg.OnDurableEvent, so a hook already set is
// called first and t's after it, even when that hook panics (the panic
// then goes on to the kernel, which logs it). Execution, retry and parked
// counts come through that hook: they count what the log holds, on the
// kernel's own hook goroutine, and past Config.EventHookBuffer the kernel
// drops events and they are not counted. Wire the same cfg once: twice
// counts every event twice. With a metricnoop.MeterProvider there is nothing
// to count, and Wire leaves cfg.OnDurableEvent as it is (so the kernel runs
// no hook goroutine for telemetry's sake).
func (t *Telemetry) Wire(cfg *loom.Config) {
	cfg.Observer = t
	if !t.counting {
		return
	}
	prev := cfg.OnDurableEvent
	if prev == nil {
		cfg.OnDurableEvent = t.OnDurableEvent
		return
	}
	cfg.OnDurableEvent = func(e event.Envelope) {
		defer t.OnDurableEvent(e)
		prev(e)
	}
}
