package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// Workload e's log runs: per ToolLog mode and repetition, the agent runs
// its toolTurns turns on a fresh file and the flow parks on agentGate;
// once the park's snapshot is stored the runtime and the storage close. A
// new runtime over the reopened file (a new provider aimed at the same fake
// server, with no reply scripted) answers the gate: its Resume loads the
// snapshot and the tail and drives the flow from the top, so the agent
// re-runs and every turn must be served from the log. Any request the fake
// server gets meanwhile fails the run. The completed log is then measured:
// every stored envelope's event.Encode size, by event type, and the final
// state's fold.Encode size.

// agentLogMode is how a log run keeps tool outputs: the agent's ToolLog,
// and whether the app's claim-check ring moves the tool's outputs into the
// content store (the log keeps {ref, size}; the agent tells the model the
// content, read back from the store).
type agentLogMode struct {
	toolLog agent.ToolLog
	claimed bool
}

func (m agentLogMode) String() string {
	if m.claimed {
		return string(m.toolLog) + "+claim-check"
	}
	return string(m.toolLog)
}

func (m agentLogMode) fileName() string {
	if m.claimed {
		return string(m.toolLog) + "-claimed"
	}
	return string(m.toolLog)
}

// agentReplayRun is one log run: the live run to the park, its replay, and
// the completed log's figures.
type agentReplayRun struct {
	live, open, replay time.Duration
	requests           int // the fake server's requests during the replay
	log                AgentLogBytes
}

// measureAgentLog runs reps log runs of toolTurns turns in each mode and
// reports the first run's bytes and the medians of the timings.
func measureAgentLog(ctx context.Context, dir string, sync sqlite.Synchronous, toolTurns, reps int,
	progress func(string, ...any)) (AgentBytesReport, AgentReplayReport, error) {
	logs := AgentBytesReport{ToolTurns: toolTurns, Turns: toolTurns + 1, Target: agentTargetLeanOverFull, Comparison: atMost}
	replay := AgentReplayReport{ToolTurns: toolTurns, Turns: toolTurns + 1, Repetitions: reps}
	for _, mode := range []agentLogMode{{toolLog: agent.ToolLogFull}, {toolLog: agent.ToolLogLean}, {toolLog: agent.ToolLogLean, claimed: true}} {
		var runs []agentReplayRun
		for i := range reps {
			r, err := agentReplayOnce(ctx, dir, sync, toolTurns, mode, i)
			if err != nil {
				return logs, replay, fmt.Errorf("workload e: ToolLog %s, log run %d: %w", mode, i, err)
			}
			replay.ProviderRequests += r.requests
			runs = append(runs, r)
		}
		m := summarizeReplays(runs)
		switch {
		case mode.claimed:
			logs.LeanClaimed, replay.LeanClaimed = runs[0].log, m
		case mode.toolLog == agent.ToolLogFull:
			logs.Full, replay.Full = runs[0].log, m
		default:
			logs.Lean, replay.Lean = runs[0].log, m
		}
		progress("workload e: ToolLog %s, %d turns: %d log bytes (%.0f/turn), state %d bytes; live %.1f ms, replay %.1f ms (%.3f)",
			mode, toolTurns+1, runs[0].log.LogBytes, runs[0].log.BytesPerTurn, runs[0].log.StateBytes, m.LiveMs, m.ReplayMs, m.Ratio)
	}
	if logs.Full.LogBytes > 0 {
		logs.LeanOverFull = round(float64(logs.Lean.LogBytes) / float64(logs.Full.LogBytes))
		logs.LeanClaimedOverFull = round(float64(logs.LeanClaimed.LogBytes) / float64(logs.Full.LogBytes))
		logs.Ratio = logs.LeanOverFull
		logs.Met = logs.Ratio <= logs.Target
	}
	if logs.Full.StateBytes > 0 {
		logs.LeanOverFullState = round(float64(logs.Lean.StateBytes) / float64(logs.Full.StateBytes))
	}
	return logs, replay, nil
}

// summarizeReplays reduces one mode's log runs to medians.
func summarizeReplays(runs []agentReplayRun) AgentReplayMode {
	var live, open, replay []time.Duration
	for _, r := range runs {
		live, open, replay = append(live, r.live), append(open, r.open), append(replay, r.replay)
	}
	med := func(ds []time.Duration) float64 { return millis(median(slices.Clone(ds))) }
	m := AgentReplayMode{LiveMs: med(live), ReplayMs: med(replay), OpenMs: med(open),
		LiveSamplesMs: samplesMs(live), ReplaySamplesMs: samplesMs(replay)}
	m.Ratio = ratioOf(m.LiveMs, m.ReplayMs)
	return m
}

// agentReplayOnce is one log run in mode on a fresh file, removed at the
// end.
func agentReplayOnce(ctx context.Context, dir string, sync sqlite.Synchronous, toolTurns int, mode agentLogMode, rep int) (
	r agentReplayRun, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*agentRunTimeout)
	defer cancel()
	name := "e-log-" + mode.fileName() + "-" + strconv.Itoa(rep)
	path := filepath.Join(dir, name+".db")
	defer func() { err = errors.Join(err, removeDB(path)) }()
	srv := anthropictest.Start()
	defer func() { err = errors.Join(err, fakeServerErr(srv)) }()
	id := name
	if r.live, err = agentLiveToPark(ctx, path, sync, srv, toolTurns, mode, id); err != nil {
		return r, fmt.Errorf("live: %w", err)
	}
	before := len(srv.Requests())
	start := time.Now()
	p, err := openAgentProcess(path, sync, srv, mode)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	r.open = time.Since(start)
	start = time.Now()
	if err := p.rt.Resume(ctx, id, loom.ResumeEvent{EventType: agentGate, Payload: json.RawMessage("true")}); err != nil {
		return r, fmt.Errorf("replay: %w", err)
	}
	res, err := p.rt.WaitForCompletion(ctx, id)
	if err != nil {
		return r, fmt.Errorf("replay: %w", err)
	}
	r.replay = time.Since(start)
	if r.requests = len(srv.Requests()) - before; r.requests != 0 {
		return r, fmt.Errorf("replay: the fake server got %d requests, want none: a recorded turn asked the model again", r.requests)
	}
	if err := checkResult(res, toolTurns); err != nil {
		return r, fmt.Errorf("replay: %w", err)
	}
	if err := p.healthy(); err != nil {
		return r, fmt.Errorf("replay: %w", err)
	}
	evs, err := store.Read(ctx, p.raw, id)
	if err != nil {
		return r, err
	}
	r.log, err = logBytes(evs, res.State, mode, toolTurns+1)
	return r, err
}

// agentLiveToPark runs the agent on a fresh file at path until the flow's
// park is durable (as a subscriber to the log sees it), waits for the
// park's snapshot, and closes runtime and storage. It returns Start → park.
func agentLiveToPark(ctx context.Context, path string, sync sqlite.Synchronous, srv *anthropictest.Server, toolTurns int,
	mode agentLogMode, id string) (_ time.Duration, err error) {
	p, err := openAgentProcess(path, sync, srv, mode)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	sub, err := p.raw.Subscribe(ctx, id, 0)
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	srv.Enqueue(agentScript(toolTurns)...)
	start := time.Now()
	if _, err := p.rt.Start(ctx, agentFlowID, agentInput{Park: true}, loom.WithExecutionID(id)); err != nil {
		return 0, err
	}
	park, err := awaitPark(sub)
	if err != nil {
		return 0, err
	}
	live := time.Since(start)
	if err := awaitSnapshot(ctx, p.snaps, id, park); err != nil {
		return 0, err
	}
	if n := len(srv.Requests()); n != toolTurns+1 {
		return 0, fmt.Errorf("the fake server got %d requests, want %d", n, toolTurns+1)
	}
	return live, p.healthy()
}

// awaitPark follows sub to the first EXECUTION_SUSPENDED and returns its
// sequence.
func awaitPark(sub *store.Subscription) (int64, error) {
	for e := range sub.Events() {
		switch e.Type {
		case event.ExecutionSuspended:
			return e.Sequence, nil
		case event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled:
			return 0, fmt.Errorf("the flow ended (%s) instead of parking", e.Type)
		}
	}
	return 0, errors.Join(errors.New("the subscription ended before the park"), sub.Err())
}

// logBytes measures a completed log: every envelope's event.Encode size,
// summed by kind (eventKind), and the final state's fold.Encode size.
func logBytes(evs []event.Envelope, final fold.State, mode agentLogMode, turns int) (AgentLogBytes, error) {
	l := AgentLogBytes{ToolLog: mode.String(), Events: len(evs), ByKind: map[string]*KindBytes{}}
	for _, e := range evs {
		raw, err := event.Encode(e)
		if err != nil {
			return l, fmt.Errorf("encoding event %d: %w", e.Sequence, err)
		}
		l.LogBytes += int64(len(raw))
		k := l.ByKind[eventKind(e)]
		if k == nil {
			k = &KindBytes{}
			l.ByKind[eventKind(e)] = k
		}
		k.Events++
		k.Bytes += int64(len(raw))
		k.PayloadBytes += int64(len(e.Payload))
	}
	for _, k := range l.ByKind { //loom:order-independent each entry on its own
		k.BytesPerTurn = round(float64(k.Bytes) / float64(turns))
		k.Share = round(float64(k.Bytes) / float64(max(l.LogBytes, 1)))
	}
	l.BytesPerTurn = round(float64(l.LogBytes) / float64(turns))
	state, err := fold.Encode(final)
	if err != nil {
		return l, fmt.Errorf("encoding the final state: %w", err)
	}
	l.StateBytes = len(state)
	l.StateBytesPerTurn = round(float64(len(state)) / float64(turns))
	l.StateParts, err = stateParts(state)
	return l, err
}

// stateParts splits an encoded state's bytes: each frame (its key and
// value) under "frames model", "frames tool" or "frames other" by step id,
// the variables under "variables", and the rest (status, sequence,
// timestamps, punctuation) under "rest", so the parts sum to the whole.
func stateParts(state []byte) (map[string]int, error) {
	var top struct {
		Frames    map[string]json.RawMessage `json:"frames"`
		Variables json.RawMessage            `json:"variables"`
	}
	if err := json.Unmarshal(state, &top); err != nil {
		return nil, fmt.Errorf("decoding the encoded state: %w", err)
	}
	parts := map[string]int{"variables": len(top.Variables)}
	framed := 0
	for id, f := range top.Frames { //loom:order-independent sums
		kind := "frames other"
		switch {
		case strings.HasSuffix(id, "/model"):
			kind = "frames model"
		case strings.Contains(id, "/tool:"):
			kind = "frames tool"
		}
		n := len(strconv.Quote(id)) + 1 + len(f) + 1 // "id":value,
		parts[kind] += n
		framed += n
	}
	parts["rest"] = len(state) - framed - len(top.Variables)
	return parts, nil
}

// eventKind is the event's type, with the agent's step events told apart
// by step: "STEP_COMPLETED model" for a turn's model call, "… tool" for its
// tool call.
func eventKind(e event.Envelope) string {
	var p struct {
		StepID string `json:"stepId"`
	}
	if !strings.HasPrefix(e.Type, "STEP_") && e.Type != event.ResourceMetered {
		return e.Type
	}
	if json.Unmarshal(e.Payload, &p) != nil {
		return e.Type
	}
	switch {
	case strings.HasSuffix(p.StepID, "/model"):
		return e.Type + " model"
	case strings.Contains(p.StepID, "/tool:"):
		return e.Type + " tool"
	}
	return e.Type
}
