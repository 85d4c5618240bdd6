package telemetry_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/telemetry"
)

// rig is a Telemetry on the real SDK (an in-memory span recorder, a
// manual metric reader) and the event store its runtimes share.
type rig struct {
	t      *testing.T
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	tel    *telemetry.Telemetry
	events store.EventStore
	logs   *syncBuffer
}

func newRig(t *testing.T, opts telemetry.Options) *rig {
	t.Helper()
	r := &rig{t: t, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(),
		events: memstore.NewEventStore(), logs: &syncBuffer{}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		if err := r.tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := mp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	opts.TracerProvider, opts.MeterProvider = r.tp, mp
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(r.logs, nil))
	}
	tel, err := telemetry.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.tel = tel
	return r
}

// runtime opens a runtime over the rig's store, wired to its Telemetry,
// with recovery and sticky parks off (a park ends its drive).
func (r *rig) runtime(flows ...*loom.Flow) *loom.Runtime {
	r.t.Helper()
	cfg := loom.Config{Events: r.events, Flows: flows, Recovery: loom.Recovery{Disabled: true}, StickyParks: -1,
		Logger: slog.New(slog.DiscardHandler)}
	r.tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// caller starts a span standing for an app's own request.
func (r *rig) caller() (context.Context, trace.Span) {
	return r.tp.Tracer("app").Start(context.Background(), "app.request")
}

func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r.t.Cleanup(cancel)
	return ctx
}

// log returns the events of execution id.
func (r *rig) log(id string) []event.Envelope {
	r.t.Helper()
	evs, err := store.Read(context.Background(), r.events, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

// ended returns the ended spans named name, in the order they ended.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// metrics collects the rig's metrics.
func (r *rig) metrics() metricdata.ResourceMetrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatal(err)
	}
	return rm
}

// attr returns s's attribute key, or an invalid value.
func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// intSum sums the data points of the int64 sum or gauge name whose
// attributes include every pair of match (0 for a metric not reported).
func intSum(t *testing.T, rm metricdata.ResourceMetrics, name string, match ...attribute.KeyValue) int64 {
	t.Helper()
	var total int64
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			found = true
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			default:
				t.Fatalf("%s is a %T", name, m.Data)
			}
			for _, p := range points {
				if hasAll(p.Attributes, match) {
					total += p.Value
				}
			}
		}
	}
	_ = found // an instrument never recorded is not reported: its sum is 0
	return total
}

// histCount counts the recordings of histogram name whose attributes
// include every pair of match.
func histCount(t *testing.T, rm metricdata.ResourceMetrics, name string, match ...attribute.KeyValue) uint64 {
	t.Helper()
	var total uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if hasAll(p.Attributes, match) {
						total += p.Count
					}
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					if hasAll(p.Attributes, match) {
						total += p.Count
					}
				}
			default:
				t.Fatalf("%s is a %T", name, m.Data)
			}
			return total
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func hasAll(set attribute.Set, match []attribute.KeyValue) bool {
	for _, kv := range match {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// noWait retries attempts times with no backoff and no sleep.
func noWait(attempts int) loom.StepOption {
	return loom.WithRetry(middleware.RetryPolicy{MaxAttempts: attempts, Backoff: func(int64) time.Duration { return 0 },
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
