package telemetry_test

// Benchmarks of what telemetry costs a 10-step write-behind flow, one op
// being one flow from Start to completion, on memory stores and on a
// SQLite file, three ways side by side in one run:
//
//	none  no Observer, no hooks (the kernel calls nothing)
//	noop  telemetry wired with no-op tracer and meter providers
//	sdk   telemetry wired with the real SDK: a batch span processor to a
//	      discarding exporter, a ManualReader
//
// Targets (of ns/op): noop ≤ 1.02× none, sdk ≤ 1.15× none. No test checks
// them; run
//
//	go test -run '^$' -bench TenStepFlow -benchtime 2s -count 3 ./telemetry/
//
// BenchmarkTenStepFlowInterleaved runs the three in turn inside every op so
// a machine whose load drifts slows them alike, and reports the ratios.

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/telemetry"
)

const benchSteps = 10

var benchStep = loom.NewStep("step", func(_ context.Context, n int) (int, error) { return n + 1, nil })

func benchFlow() *loom.Flow {
	return loom.NewFlow("ten-steps", func(ctx *loom.Context, n int) (int, error) {
		for i := range benchSteps {
			var err error
			if n, err = loom.Run(ctx, benchStep.Iter(i), n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

type benchConfig struct {
	name string
	// wire sets up telemetry on cfg, returning what to shut down.
	wire func(b *testing.B, cfg *loom.Config)
}

func benchConfigs() []benchConfig {
	return []benchConfig{
		{"none", func(*testing.B, *loom.Config) {}},
		{"noop", func(b *testing.B, cfg *loom.Config) {
			tel, err := telemetry.New(telemetry.Options{TracerProvider: tracenoop.NewTracerProvider(),
				MeterProvider: metricnoop.NewMeterProvider()})
			if err != nil {
				b.Fatal(err)
			}
			tel.Wire(cfg)
		}},
		{"sdk", func(b *testing.B, cfg *loom.Config) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			tel, err := telemetry.New(telemetry.Options{TracerProvider: tp, MeterProvider: mp})
			if err != nil {
				b.Fatal(err)
			}
			tel.Wire(cfg)
		}},
	}
}

type benchStore struct {
	name string
	open func(b *testing.B) (store.EventStore, store.SnapshotStore)
}

func benchStores() []benchStore {
	return []benchStore{
		{"memstore", func(*testing.B) (store.EventStore, store.SnapshotStore) {
			return memstore.NewEventStore(), memstore.NewSnapshotStore()
		}},
		{"sqlite", func(b *testing.B) (store.EventStore, store.SnapshotStore) {
			db, err := sqlite.Open(filepath.Join(b.TempDir(), "loom.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := db.Close(); err != nil {
					b.Error(err)
				}
			})
			return db.EventStore(), db.SnapshotStore()
		}},
	}
}

func benchRuntime(b *testing.B, st benchStore, c benchConfig) *loom.Runtime {
	events, snaps := st.open(b)
	cfg := loom.Config{Events: events, Snapshots: snaps, Flows: []*loom.Flow{benchFlow()},
		Recovery: loom.Recovery{Disabled: true}, Durability: loom.WriteBehind, Logger: slog.New(slog.DiscardHandler)}
	c.wire(b, &cfg)
	rt, err := loom.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := rt.Close(); err != nil {
			b.Error(err)
		}
	})
	return rt
}

func runBenchFlow(b *testing.B, rt *loom.Runtime) {
	ctx := context.Background()
	id, err := rt.Start(ctx, "ten-steps", 0)
	if err != nil {
		b.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	if string(res.Output) != strconv.Itoa(benchSteps) {
		b.Fatalf("output %s", res.Output)
	}
}

func BenchmarkTenStepFlow(b *testing.B) {
	for _, st := range benchStores() {
		for _, c := range benchConfigs() {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				rt := benchRuntime(b, st, c)
				b.ReportAllocs()
				for b.Loop() {
					runBenchFlow(b, rt)
				}
			})
		}
	}
}

func BenchmarkTenStepFlowInterleaved(b *testing.B) {
	for _, st := range benchStores() {
		b.Run(st.name, func(b *testing.B) {
			cs := benchConfigs()
			rts := make([]*loom.Runtime, len(cs))
			for i, c := range cs {
				rts[i] = benchRuntime(b, st, c)
			}
			spent := make([]time.Duration, len(cs))
			n := 0
			for b.Loop() {
				for k := range cs {
					i := (n + k) % len(cs)
					start := time.Now()
					runBenchFlow(b, rts[i])
					spent[i] += time.Since(start)
				}
				n++
			}
			for i, c := range cs {
				b.ReportMetric(float64(spent[i].Nanoseconds())/float64(n), c.name+"-ns/flow")
			}
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "noop/none")
			b.ReportMetric(float64(spent[2])/float64(spent[0]), "sdk/none")
		})
	}
}
