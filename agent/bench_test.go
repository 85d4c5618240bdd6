package agent_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The agent loop's cost per turn on memstore (no commit cost) against the
// Anthropic fake server, at two sizes so a turn's cost growing with the
// turns before it shows, and the same requests sent by the provider alone.
// Each iteration is one run of n tool turns (one read_logs call answering
// about 2 KiB of JSON) and an answer turn: n+1 model calls, which every
// per-turn metric divides by. The whole-workload figures on SQLite, judged
// against baselines, are bench's workload e.

// benchAgentSizes are the tool turns of a benchmarked run.
var benchAgentSizes = []int{10, 50}

// benchAgentQuery is the tool's input.
type benchAgentQuery struct {
	Service string `json:"service"`
	Page    int    `json:"page"`
}

// benchAgentLine is one line of the tool's answer.
type benchAgentLine struct {
	At      string `json:"at"`
	Level   string `json:"level"`
	Pod     string `json:"pod"`
	TraceID string `json:"traceId"`
	Message string `json:"message"`
}

// benchAgentReadLogs answers 11 log lines, about 2 KiB of JSON.
func benchAgentReadLogs(_ context.Context, q benchAgentQuery) ([]benchAgentLine, error) {
	lines := make([]benchAgentLine, 11)
	for i := range lines {
		n := q.Page*len(lines) + i
		lines[i] = benchAgentLine{At: fmt.Sprintf("2026-03-14T14:%02d:%02d.%03dZ", n/60%60, n%60, n*37%1000),
			Level: [...]string{"info", "warn", "error"}[n%3], Pod: q.Service + "-7d9f" + strconv.Itoa(n%5),
			TraceID: fmt.Sprintf("%032x", uint64(n)*0x9e3779b97f4a7c15), Message: "pool exhausted: waited 2400ms for a connection"}
	}
	return lines, nil
}

// benchAgentScript is n turns of one read_logs call each, then an answer.
func benchAgentScript(n int) []llmtest.Reply {
	out := make([]llmtest.Reply, 0, n+1)
	for i := 1; i <= n; i++ {
		out = append(out, llmtest.Reply{Response: llm.Response{Model: "claude-sonnet-4-5", StopReason: llm.StopToolUse,
			Usage: llm.Usage{InputTokens: int64(400 + 600*i), OutputTokens: 40},
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("toolu_%04d", i), Name: "read_logs",
				Arguments: []byte(`{"service":"checkout","page":` + strconv.Itoa(i) + `}`)}}}})
	}
	return append(out, llmtest.Text("The checkout pool is exhausted.", int64(400+600*(n+1)), 60))
}

// benchAgentRuntime is a runtime over stores with the benchmark's agent
// flow asking p.
func benchAgentRuntime(b *testing.B, stores store.Set, p llm.Provider, mode agent.ToolLog) *loom.Runtime {
	b.Helper()
	cfg := agent.Config{ID: "bench", Provider: p, Model: "claude-sonnet-4-5", System: "You are on call.", ToolLog: mode,
		MaxTurns: agent.MaxTurnsLimit, Tools: []*agent.Tool{
			agent.NewTool("read_logs", "Read one page of a service's logs.", benchAgentReadLogs, agent.ReadOnly())}}
	flow := loom.NewFlow("agent-bench", func(ctx *loom.Context, _ struct{}) (int, error) {
		r, err := agent.Run(ctx, cfg, llm.UserText("checkout is slow; find out why."))
		return r.Turns, err
	})
	rt, err := loom.New(loom.Config{Storage: stores, Flows: []*loom.Flow{flow}, Durability: loom.StepDurable,
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close() })
	return rt
}

// BenchmarkAgentTurn runs the agent n tool turns per iteration, in both
// ToolLog modes, and reports ns/turn, the log's envelope bytes per turn
// (event.Encode) and its events per turn.
func BenchmarkAgentTurn(b *testing.B) {
	for _, n := range benchAgentSizes {
		for _, mode := range []agent.ToolLog{agent.ToolLogFull, agent.ToolLogLean} {
			b.Run(fmt.Sprintf("turns=%d/log=%s", n+1, mode), func(b *testing.B) {
				srv := anthropictest.NewServer(b)
				stores := memstore.NewSet()
				rt := benchAgentRuntime(b, stores, srv.Provider(b, "sk-ant-bench"), mode)
				ctx := context.Background()
				var id string
				var elapsed time.Duration
				for b.Loop() {
					srv.Enqueue(benchAgentScript(n)...)
					start := time.Now()
					var err error
					if id, err = rt.Start(ctx, "agent-bench", struct{}{}); err != nil {
						b.Fatal(err)
					}
					res, err := rt.WaitForCompletion(ctx, id)
					if err != nil {
						b.Fatal(err)
					}
					elapsed += time.Since(start)
					if string(res.Output) != strconv.Itoa(n+1) {
						b.Fatalf("the agent made %s turns, want %d", res.Output, n+1)
					}
				}
				turns := float64(b.N * (n + 1))
				b.ReportMetric(float64(elapsed.Nanoseconds())/turns, "ns/turn")
				evs, err := store.Read(ctx, stores.Events, id)
				if err != nil {
					b.Fatal(err)
				}
				size := 0
				for _, e := range evs {
					raw, err := event.Encode(e)
					if err != nil {
						b.Fatal(err)
					}
					size += len(raw)
				}
				b.ReportMetric(float64(size)/float64(n+1), "B/turn")
				b.ReportMetric(float64(len(evs))/float64(n+1), "events/turn")
			})
		}
	}
}

// BenchmarkAgentProviderCall sends, per iteration, the requests of one
// agent run of n tool turns (as the fake server received them from the
// agent) by provider.Complete alone, with no kernel: the baseline of
// BenchmarkAgentTurn's ns/turn.
func BenchmarkAgentProviderCall(b *testing.B) {
	for _, n := range benchAgentSizes {
		b.Run(fmt.Sprintf("turns=%d", n+1), func(b *testing.B) {
			ctx := context.Background()
			rec := anthropictest.NewServer(b)
			rt := benchAgentRuntime(b, memstore.NewSet(), rec.Provider(b, "sk-ant-bench"), agent.ToolLogFull)
			rec.Enqueue(benchAgentScript(n)...)
			id, err := rt.Start(ctx, "agent-bench", struct{}{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.WaitForCompletion(ctx, id); err != nil {
				b.Fatal(err)
			}
			reqs := rec.Requests()
			srv := anthropictest.NewServer(b)
			p := srv.Provider(b, "sk-ant-bench")
			var elapsed time.Duration
			for b.Loop() {
				srv.Enqueue(benchAgentScript(n)...)
				start := time.Now()
				for _, r := range reqs {
					if _, err := p.Complete(ctx, r.Request, nil); err != nil {
						b.Fatal(err)
					}
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*(n+1)), "ns/call")
		})
	}
}
