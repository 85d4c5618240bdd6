package middleware_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store/memstore"
)

// benchSteps is the length of the benchmarked flow.
const benchSteps = 10

// BenchmarkRingFlow runs the same 10-step flow on memory stores four ways,
// side by side in one run: unwired (Config.Middleware nil), with an empty
// chain, and with every ring wired but permissive — retry with no failure,
// metering with no budget, a safety validator that passes on input and
// output, redaction with no reference in the input, and a claim check whose
// outputs stay under the cap — and, to separate the chain's own cost from
// the one RESOURCE_METERED event Metering appends per effect, every ring but
// Metering. Each op is one flow, Start to completion; flows/s is reported.
// The G2 target: unwired/empty-chain ≤ 1.05.
//
//	go test -run '^$' -bench RingFlow -count 5 ./middleware/
func BenchmarkRingFlow(b *testing.B) {
	for _, v := range ringVariants() {
		b.Run(v.name, func(b *testing.B) { benchFlow(b, v.mws()) })
	}
}

// BenchmarkRingFlowInterleaved runs the variants of BenchmarkRingFlow in
// turn inside every op (one flow each, the order rotating), so a machine
// whose load drifts during the run slows them alike; it reports each
// variant's flows/s and the ratios unwired/empty-chain and
// unwired/all-rings (of flows/s: above 1 means the variant is slower).
func BenchmarkRingFlowInterleaved(b *testing.B) {
	vs := ringVariants()
	rts := make([]*loom.Runtime, len(vs))
	for i, v := range vs {
		rts[i] = benchRuntime(b, v.mws())
	}
	spent := make([]time.Duration, len(vs))
	n := 0
	for b.Loop() {
		for k := range vs {
			i := (n + k) % len(vs)
			start := time.Now()
			runBenchFlow(b, rts[i])
			spent[i] += time.Since(start)
		}
		n++
	}
	rate := make(map[string]float64, len(vs))
	for i, v := range vs {
		rate[v.name] = float64(n) / spent[i].Seconds()
		b.ReportMetric(rate[v.name], v.name+"-flows/s")
	}
	b.ReportMetric(rate["unwired"]/rate["empty-chain"], "unwired/empty")
	b.ReportMetric(rate["unwired"]/rate["all-rings"], "unwired/all-rings")
}

type ringVariant struct {
	name string
	mws  func() []effect.Middleware
}

func ringVariants() []ringVariant {
	pass := func(*effect.Context, json.RawMessage) error { return nil }
	return []ringVariant{
		{"unwired", func() []effect.Middleware { return nil }},
		{"empty-chain", func() []effect.Middleware { return []effect.Middleware{} }},
		{"all-rings", func() []effect.Middleware {
			return []effect.Middleware{
				middleware.Retry(middleware.RetryPolicy{}),
				middleware.Metering(middleware.Meter{}, middleware.Budget{}),
				middleware.Safety(middleware.Validator{Name: "pass", Input: pass, Output: pass}),
				middleware.Redaction(middleware.StaticSecrets{"unused": "x"}),
				middleware.ClaimCheck(memstore.NewContentStore(), middleware.ClaimCheckOptions{}),
			}
		}},
		// The same rings without Metering: what the chain itself costs,
		// apart from the one RESOURCE_METERED event per effect.
		{"rings-but-metering", func() []effect.Middleware {
			return []effect.Middleware{
				middleware.Retry(middleware.RetryPolicy{}),
				middleware.Safety(middleware.Validator{Name: "pass", Input: pass, Output: pass}),
				middleware.Redaction(middleware.StaticSecrets{"unused": "x"}),
				middleware.ClaimCheck(memstore.NewContentStore(), middleware.ClaimCheckOptions{}),
			}
		}},
	}
}

func benchFlow(b *testing.B, mws []effect.Middleware) {
	rt := benchRuntime(b, mws)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		runBenchFlow(b, rt)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "flows/s")
}

// benchRuntime is a runtime over memory stores with the 10-step flow "ten",
// every step the registered effect "work", wrapped in mws; it is closed
// when the benchmark ends.
func benchRuntime(b *testing.B, mws []effect.Middleware) *loom.Runtime {
	b.Helper()
	reg, err := effect.NewRegistry(map[string]effect.Func{
		"work": func(_ *effect.Context, in json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true,"in":` + string(in) + `}`), nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	tasks := make([]*loom.Task, benchSteps)
	for i := range tasks {
		tasks[i] = &loom.Task{ID: "step#" + strconv.Itoa(i), Kind: "tool", ToolID: "work"}
	}
	flow := loom.NewFlow("ten", func(ctx *loom.Context, _ struct{}) (int, error) {
		for i, t := range tasks {
			if _, err := ctx.Execute(t, map[string]int{"i": i}); err != nil {
				return 0, err
			}
		}
		return len(tasks), nil
	})
	rt, err := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow},
		Effects: reg, Middleware: mws})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return rt
}

// runBenchFlow runs "ten" once, Start to completion.
func runBenchFlow(b *testing.B, rt *loom.Runtime) {
	ctx := context.Background()
	id, err := rt.Start(ctx, "ten", nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rt.WaitForCompletion(ctx, id); err != nil {
		b.Fatal(err)
	}
}
