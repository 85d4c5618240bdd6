package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// Workload e: the kernel's cost per agent turn beyond its durable commits,
// against the model call itself. Every run is agent.Run on a fresh SQLite
// file (StepDurable, plugin defaults, the event store behind the counting
// decorator) against the Anthropic fake server on loopback: T turns that
// each make one model call answered with one read_logs call and one tool
// step answering about 2 KiB of JSON, then an answer turn, T+1 model calls
// in all ("turns" below). Per size and repetition it measures
//
//	a  the agent's wall time, Start → completion, per turn;
//	b  the same T+1 requests (as the fake server received them from the
//	   agent) sent by provider.Complete directly, no kernel, per call;
//	c  the raw one-row-per-commit time times the Append calls (durable
//	   commits) per turn the decorator counted,
//
// alternating which of a and b goes first, after one unmeasured warm-up
// run per size. overhead = median a − median b − c, judged against 5 % of
// a nominal 50 ms model call at both sizes. The tool-call log's bytes and
// the replay of a parked 200-turn run are agentlog.go.

// Limits and fixed figures of workload e.
const (
	// agentModelCallMs is the nominal model call the overhead is judged
	// against, and agentTargetFraction the share of it allowed.
	agentModelCallMs    = 50.0
	agentTargetFraction = 0.05
	// agentTargetLeanOverFull is the lean/full log size target.
	agentTargetLeanOverFull = 0.4
	// maxAgentRepetitions caps the measured runs per size and mode.
	maxAgentRepetitions = 100
	// agentRunTimeout bounds one run, live or replayed.
	agentRunTimeout = 10 * time.Minute
)

// agentDescription is workload e's description in the report.
const agentDescription = "agent.Run on a fresh SQLite file per run (StepDurable, plugin defaults) against the Anthropic " +
	"fake server on loopback: toolTurns turns of one model call answered with one read_logs tool call (a tool step " +
	"answering toolOutputBytes of JSON), then an answer turn; turns = toolTurns + 1 model calls, every per-turn figure " +
	"divides by it. a = agentMsPerTurn, Start → completion; b = providerMsPerCall, the same requests sent by " +
	"provider.Complete directly (no kernel) to a fake server in the same run; c = commitMsPerTurn, appendsPerTurn (the " +
	"counting decorator's Append calls) times rawCommitMs (1000 / the raw one-row-per-commit rate measured before and " +
	"after each size's runs, 55-byte rows); medians of the repetitions, a and b alternating which goes first. overheadMsPerTurn = a − b − c; " +
	"ratio is its fraction of a nominal 50 ms model call, judged at the worse size (target <= 0.05, i.e. 2.5 ms). " +
	"linearity is large/small per turn. bytes: a parked run of large.toolTurns turns per ToolLog mode, every stored " +
	"envelope's event.Encode size, and fold.Encode of the final state. replay: a new runtime over the reopened file " +
	"resumes the parked run, the agent re-running with every turn served from the log; providerRequests counts what " +
	"the fake server got meanwhile and must be 0"

// agentTiming is what the timed runs of one size measured.
type agentTiming struct {
	toolTurns       int
	agent, provider []time.Duration // per repetition: the whole run, the whole call sequence
	appends         []int64         // per repetition, counted by the decorator
	events          int64           // per run, counted by the decorator (the same every run)
	transactions    []int64         // per repetition, the writer's commits
	lastRequest     int             // bytes of the last request's JSON (the transcript's size)
}

// measureAgent runs workload e: the timed runs of each size, each around a
// raw one-row-per-commit baseline, then the log and replay runs of the large
// size in both ToolLog modes.
func measureAgent(ctx context.Context, dir string, sync sqlite.Synchronous, small, large, reps int, raw *rawBaselines,
	progress func(string, ...any)) (*AgentReport, error) {
	r := &AgentReport{Description: agentDescription, ModelCallMs: agentModelCallMs, Repetitions: reps,
		ToolOutputBytes: agentToolOutputBytes(), Baseline: "1000 / rawOneRowPerCommitPerSec × appendsPerTurn",
		TargetOverheadMs: agentModelCallMs * agentTargetFraction, Target: agentTargetFraction, Comparison: atMost}
	for _, size := range []struct {
		turns int
		out   *AgentTurnsReport
	}{{small, &r.Small}, {large, &r.Large}} {
		// Each size has its baseline measured around it: a shared disk's
		// commit rate drifts over a run of minutes.
		var t agentTiming
		samples, err := raw.around(ctx, func() (err error) {
			t, err = timeAgentTurns(ctx, dir, sync, size.turns, reps, progress)
			return err
		}, rawOne)
		if err != nil {
			return nil, fmt.Errorf("workload e: %d turns: %w", size.turns, err)
		}
		*size.out = t.report(samples[0])
	}
	worst := max(r.Small.OverheadMsPerTurn, r.Large.OverheadMsPerTurn)
	r.OverheadMsPerTurn, r.Ratio = worst, round(worst/agentModelCallMs)
	r.Met = r.Small.RawCommitMs > 0 && r.Large.RawCommitMs > 0 && worst <= r.TargetOverheadMs
	r.Linearity = AgentLinearity{AgentMsPerTurn: ratioOf(r.Small.AgentMsPerTurn, r.Large.AgentMsPerTurn),
		ProviderMsPerCall: ratioOf(r.Small.ProviderMsPerCall, r.Large.ProviderMsPerCall),
		KernelMsPerTurn:   ratioOf(r.Small.AgentMsPerTurn-r.Small.ProviderMsPerCall, r.Large.AgentMsPerTurn-r.Large.ProviderMsPerCall),
		OverheadMsPerTurn: ratioOf(r.Small.OverheadMsPerTurn, r.Large.OverheadMsPerTurn)}
	for _, s := range []AgentTurnsReport{r.Small, r.Large} {
		progress("workload e: %d turns: agent %.3f ms/turn, provider %.3f ms/call, %.2f appends/turn (%.3f ms of commits), "+
			"overhead %.3f ms/turn (%.1f %% of %v ms), a/b %.2f", s.Turns, s.AgentMsPerTurn, s.ProviderMsPerCall,
			s.AppendsPerTurn, s.CommitMsPerTurn, s.OverheadMsPerTurn, 100*s.OverheadFraction, agentModelCallMs, s.AgentOverProvider)
	}
	var err error
	if r.Bytes, r.Replay, err = measureAgentLog(ctx, dir, sync, large, reps, progress); err != nil {
		return nil, err
	}
	return r, nil
}

// report reduces the timed runs of one size, c from the raw
// one-row-per-commit rates measured around them.
func (t agentTiming) report(rawSamples []float64) AgentTurnsReport {
	turns := float64(t.toolTurns + 1)
	perTurn := func(ds []time.Duration) (float64, []float64) {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = round(float64(d) / float64(time.Millisecond) / turns)
		}
		return round(float64(median(slices.Clone(ds))) / float64(time.Millisecond) / turns), out
	}
	meanOf := func(ns []int64) float64 {
		xs := make([]float64, len(ns))
		for i, n := range ns {
			xs[i] = float64(n)
		}
		return mean(xs)
	}
	appends := meanOf(t.appends) / turns
	r := AgentTurnsReport{ToolTurns: t.toolTurns, Turns: t.toolTurns + 1,
		AppendsPerTurn: round(appends), EventsPerTurn: round(float64(t.events) / turns),
		TransactionsPerTurn: round(meanOf(t.transactions) / turns), LastRequestBytes: t.lastRequest,
		BaselineSamples: rawSamples}
	if rate := mean(rawSamples); rate > 0 {
		r.RawCommitMs = round(1000 / rate)
	}
	r.AgentMsPerTurn, r.AgentSamplesMs = perTurn(t.agent)
	r.ProviderMsPerCall, r.ProviderSamplesMs = perTurn(t.provider)
	r.CommitMsPerTurn = round(appends * r.RawCommitMs)
	r.OverheadMsPerTurn = round(r.AgentMsPerTurn - r.ProviderMsPerCall - r.CommitMsPerTurn)
	r.OverheadFraction = round(r.OverheadMsPerTurn / agentModelCallMs)
	if r.ProviderMsPerCall > 0 {
		r.AgentOverProvider = round(r.AgentMsPerTurn / r.ProviderMsPerCall)
	}
	return r
}

// timeAgentTurns measures reps agent runs of toolTurns tool turns and as
// many provider-only sequences, after a warm-up run whose requests the
// provider-only sequences send again.
func timeAgentTurns(ctx context.Context, dir string, sync sqlite.Synchronous, toolTurns, reps int,
	progress func(string, ...any)) (agentTiming, error) {
	t := agentTiming{toolTurns: toolTurns}
	path := func(i int) string { return filepath.Join(dir, "e-"+strconv.Itoa(toolTurns)+"-"+strconv.Itoa(i)+".db") }
	warm, err := agentRun(ctx, path(0), sync, toolTurns)
	if err != nil {
		return t, fmt.Errorf("warm-up: %w", err)
	}
	t.events = warm.counts.events
	if raw, err := json.Marshal(warm.requests[len(warm.requests)-1]); err == nil {
		t.lastRequest = len(raw)
	}
	for i := range reps {
		var a agentRunResult
		agentFirst := i%2 == 0
		var b time.Duration
		if !agentFirst {
			if b, err = providerRun(ctx, warm.requests, toolTurns); err != nil {
				return t, err
			}
		}
		if a, err = agentRun(ctx, path(i+1), sync, toolTurns); err != nil {
			return t, fmt.Errorf("run %d: %w", i, err)
		}
		if agentFirst {
			if b, err = providerRun(ctx, warm.requests, toolTurns); err != nil {
				return t, err
			}
		}
		if a.counts.events != warm.counts.events {
			// The runtime fixes a run's events: a run that recorded others
			// ran another way.
			return t, fmt.Errorf("run %d recorded %d events, the warm-up %d", i, a.counts.events, warm.counts.events)
		}
		// The appends are not fixed: the journal's tail writes whatever is
		// queued when it starts, so a run's commits vary a little.
		t.agent, t.provider = append(t.agent, a.elapsed), append(t.provider, b)
		t.appends, t.transactions = append(t.appends, a.counts.appends), append(t.transactions, a.transactions)
	}
	progress("workload e: %d tool turns: %d runs measured, median %v agent, %v provider only", toolTurns, reps,
		median(slices.Clone(t.agent)).Round(time.Microsecond), median(slices.Clone(t.provider)).Round(time.Microsecond))
	return t, nil
}

// agentRunResult is one timed agent run.
type agentRunResult struct {
	elapsed      time.Duration
	counts       counts
	transactions int64
	requests     []llm.Request // what the fake server received, in order
}

// agentRun runs the agent once on a fresh file at path against a fresh
// fake server, Start → completion, and removes the file afterwards.
func agentRun(ctx context.Context, path string, sync sqlite.Synchronous, toolTurns int) (r agentRunResult, err error) {
	ctx, cancel := context.WithTimeout(ctx, agentRunTimeout)
	defer cancel()
	srv := anthropictest.Start()
	defer func() { err = errors.Join(err, fakeServerErr(srv)) }()
	p, err := openAgentProcess(path, sync, srv, agentLogMode{toolLog: agent.ToolLogFull})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, p.Close(), removeDB(path)) }()
	srv.Enqueue(agentScript(toolTurns)...)
	before, tx := p.events.read(), p.db.WriteStats().Transactions
	start := time.Now()
	id, err := p.rt.Start(ctx, agentFlowID, agentInput{})
	if err != nil {
		return r, err
	}
	res, err := p.rt.WaitForCompletion(ctx, id)
	if err != nil {
		return r, err
	}
	r.elapsed = time.Since(start)
	r.counts, r.transactions = p.events.read().minus(before), p.db.WriteStats().Transactions-tx
	if err := checkResult(res, toolTurns); err != nil {
		return r, err
	}
	for _, rec := range srv.Requests() {
		r.requests = append(r.requests, rec.Request)
	}
	if len(r.requests) != toolTurns+1 {
		return r, fmt.Errorf("the fake server got %d requests, want %d", len(r.requests), toolTurns+1)
	}
	return r, p.healthy()
}

// providerRun sends reqs to a fresh fake server through provider.Complete
// directly, answered with the agent's script, and times the sequence.
func providerRun(ctx context.Context, reqs []llm.Request, toolTurns int) (_ time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, agentRunTimeout)
	defer cancel()
	srv := anthropictest.Start()
	defer func() { err = errors.Join(err, fakeServerErr(srv)) }()
	p, err := agentProvider(srv)
	if err != nil {
		return 0, err
	}
	srv.Enqueue(agentScript(toolTurns)...)
	start := time.Now()
	for i, req := range reqs {
		resp, err := p.Complete(ctx, req, nil)
		if err != nil {
			return 0, fmt.Errorf("provider only, call %d: %w", i, err)
		}
		want := 0
		if i < toolTurns {
			want = 1
		}
		if len(resp.ToolCalls) != want {
			return 0, fmt.Errorf("provider only, call %d: %d tool calls, want %d", i, len(resp.ToolCalls), want)
		}
	}
	return time.Since(start), nil
}

// checkResult fails unless the execution completed with the outcome of
// toolTurns tool turns and an answer.
func checkResult(res loom.Result, toolTurns int) error {
	var o agentOutcome
	if err := json.Unmarshal(res.Output, &o); err != nil {
		return fmt.Errorf("the flow's output %.100q: %w", res.Output, err)
	}
	return checkOutcome(o, toolTurns)
}

// agentToolOutputBytes is the size of one tool answer's JSON.
func agentToolOutputBytes() int {
	page, _ := readLogs(context.Background(), logQuery{Service: "checkout", Page: 1})
	raw, err := json.Marshal(page)
	if err != nil {
		return 0
	}
	return len(raw)
}

// fakeServerErr closes srv and returns what it saw go wrong: a request the
// API would refuse, or one with no scripted reply.
func fakeServerErr(srv *anthropictest.Server) error {
	if err := srv.Close(); err != nil {
		return fmt.Errorf("the fake server: %w", err)
	}
	return nil
}

// removeDB removes a SQLite database file and its WAL companions.
func removeDB(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
