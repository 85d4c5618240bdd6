package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/telemetry"
)

func TestThePrometheusHandlerServesTheMetricsOverHTTP(t *testing.T) {
	prom, err := telemetry.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := prom.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	tel, err := telemetry.New(telemetry.Options{MeterProvider: prom.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{orderFlow(false)},
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)}
	tel.Wire(&cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		id, err := rt.Start(context.Background(), "order", order{Item: "disk", Qty: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForCompletion(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(prom.Handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	text := string(body)
	for _, want := range []string{
		`loom_executions_started_total{`,
		`loom_executions_completed_total{`,
		`loom_step_retries_total{`,
		`loom_step_attempts_total{`,
		`loom_step_duration_seconds_bucket{`,
		`loom_journal_append_duration_seconds_count{`,
		`loom_journal_append_events_bucket{`,
		`loom_drives_total{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !hasSample(text, "loom_executions_started_total", `loom_flow_id="order"`, "2") {
		t.Errorf("/metrics does not count 2 started executions of order:\n%s", text)
	}
}

// hasSample reports whether text has a sample line of metric with label
// and value.
func hasSample(text, metric, label, value string) bool {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, metric+"{") && strings.Contains(line, label) && strings.HasSuffix(line, "} "+value) {
			return true
		}
	}
	return false
}
