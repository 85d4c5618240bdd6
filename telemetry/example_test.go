package telemetry_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/telemetry"
)

func greeting() *loom.Flow {
	hello := loom.NewStep("hello", func(ctx context.Context, name string) (string, error) { return "hello " + name, nil })
	return loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		return loom.Run(ctx, hello, name)
	})
}

// New builds the Observer from the app's providers; Wire puts it and its
// durable-event hook into the Config before loom.New.
func ExampleTelemetry_Wire() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ctx := context.Background()
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()

	tel, err := telemetry.New(telemetry.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{greeting()}}
	tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := rt.Start(ctx, "greet", "ada")
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		fmt.Println(err)
		return
	}
	_ = rt.Close() // ends the drive and delivers the durable events

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = s
	}
	op, drive, step := byName["loom.operation start"], byName["loom.drive"], byName["loom.step"]
	fmt.Println("drive under the start:", drive.Parent().SpanID() == op.SpanContext().SpanID())
	fmt.Println("step under the drive:", step.Parent().SpanID() == drive.SpanContext().SpanID())

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "loom.executions.completed" {
			fmt.Println(m.Name, m.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
		}
	}
	// Output:
	// drive under the start: true
	// step under the drive: true
	// loom.executions.completed 1
}

// NewPrometheus serves the metrics at /metrics from a registry of its own.
func ExampleNewPrometheus() {
	prom, err := telemetry.NewPrometheus()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = prom.Shutdown(context.Background()) }()
	tel, err := telemetry.New(telemetry.Options{MeterProvider: prom.MeterProvider})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{greeting()}}
	tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"ada", "grace"} {
		id, err := rt.Start(context.Background(), "greet", name)
		if err == nil {
			_, err = rt.WaitForCompletion(context.Background(), id)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	_ = rt.Close()

	mux := http.NewServeMux()
	mux.Handle("/metrics", prom.Handler)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "loom_executions_completed_total{") {
			// Print the name, the flow label and the value.
			name, rest, _ := strings.Cut(l, "{")
			labels, value, _ := strings.Cut(rest, "} ")
			flow, _, _ := strings.Cut(labels, ",")
			fmt.Println(name, flow, value)
		}
	}
	// Output:
	// loom_executions_completed_total loom_flow_id="greet" 2
}
