package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Prometheus is a MeterProvider whose instruments are served to a
// Prometheus scraper: the OpenTelemetry Prometheus exporter on a registry
// of its own (never prometheus.DefaultRegisterer, so two of them, or an
// app's own collectors, never collide).
type Prometheus struct {
	// MeterProvider is what Options.MeterProvider takes.
	MeterProvider *sdkmetric.MeterProvider
	// Registry holds the exporter's collector; register more collectors on
	// it to serve them from the same Handler.
	Registry *prometheus.Registry
	// Handler serves Registry in the Prometheus exposition formats; mount
	// it at /metrics.
	Handler http.Handler
}

// NewPrometheus builds a Prometheus. opts are passed to the exporter
// (otelprom.WithNamespace, WithoutTargetInfo…); by default, names follow
// the exporter's translation (loom.executions.started is served as
// loom_executions_started_total, seconds histograms gain _seconds).
func NewPrometheus(opts ...otelprom.Option) (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(append([]otelprom.Option{otelprom.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	return &Prometheus{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		Registry:      reg,
		Handler:       promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// Shutdown stops the MeterProvider; the Handler then serves no more of
// its metrics.
func (p *Prometheus) Shutdown(ctx context.Context) error { return p.MeterProvider.Shutdown(ctx) }
