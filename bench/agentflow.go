package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/anthropic"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// Workload e's agent: one tool that answers about 2 KiB of JSON, a model
// scripted on the Anthropic fake server to call it once a turn for T turns
// and then answer, and one process's view of its SQLite file.

const (
	agentFlowID = "agent-turns"
	// agentID is the agent's Config.ID: its steps are
	// "bench/turn:<n>/model" and "bench/turn:<n>/tool:0".
	agentID     = "bench"
	agentModel  = "claude-sonnet-4-5"
	agentSystem = "You are the on-call engineer. Read the logs page by page until you know the cause, then answer."
	agentPrompt = "checkout is slow since 14:02; find out why."
	// agentGate is the gate the flow parks on after the agent, when asked.
	agentGate = "after-agent"
	// agentAPIKey is the fake server's key: it checks none.
	agentAPIKey = "sk-ant-bench"
	// agentLogLines is the lines of one page of the tool's answer, sized so
	// the answer is about 2 KiB of JSON (agentToolOutputBytes measures it).
	agentLogLines = 11
	// maxAgentTurns is the most tool turns a run may be asked for: the
	// answer turn comes on top, and agent.MaxTurnsLimit bounds both.
	maxAgentTurns = agent.MaxTurnsLimit - 1
)

// agentInput is the flow's input: Park parks the flow on agentGate once
// the agent has answered (the replay runs), else it completes at once.
type agentInput struct {
	Park bool `json:"park"`
}

// agentOutcome is the flow's output: the agent's end, not its transcript,
// so the log and the state hold what the agent itself records.
type agentOutcome struct {
	Turns int        `json:"turns"`
	Stop  agent.Stop `json:"stop"`
	Text  string     `json:"text"`
}

// logQuery is the tool's input.
type logQuery struct {
	Service string `json:"service"`
	Page    int    `json:"page"`
}

// logLine is one line of a log page.
type logLine struct {
	At      string `json:"at"`
	Level   string `json:"level"`
	Pod     string `json:"pod"`
	TraceID string `json:"traceId"`
	Message string `json:"message"`
}

// logPage is the tool's answer: a page of a service's logs.
type logPage struct {
	Service string    `json:"service"`
	Page    int       `json:"page"`
	Lines   []logLine `json:"lines"`
	Next    int       `json:"next"`
}

// readLogs is the trivial tool: it makes up a page of log lines from its
// input alone, so its cost is nothing beside the step around it.
func readLogs(_ context.Context, q logQuery) (logPage, error) {
	p := logPage{Service: q.Service, Page: q.Page, Next: q.Page + 1, Lines: make([]logLine, agentLogLines)}
	for i := range p.Lines {
		n := q.Page*agentLogLines + i
		p.Lines[i] = logLine{
			At:      fmt.Sprintf("2026-03-14T14:%02d:%02d.%03dZ", n/60%60, n%60, n*37%1000),
			Level:   [...]string{"info", "warn", "error"}[n%3],
			Pod:     q.Service + "-7d9f" + strconv.Itoa(n%5),
			TraceID: fmt.Sprintf("%032x", uint64(n)*0x9e3779b97f4a7c15),
			Message: "pool exhausted: waited 2400ms for a connection",
		}
	}
	return p, nil
}

// agentTurnsFlow runs the agent over p, with the tool-call log kept as
// toolLog says, and parks on agentGate afterwards when the input asks.
// MaxTurns is the limit, so the script, not the limit, ends the run.
func agentTurnsFlow(p llm.Provider, toolLog agent.ToolLog, content store.ContentStore) *loom.Flow {
	cfg := agent.Config{ID: agentID, Provider: p, Model: agentModel, System: agentSystem, ToolLog: toolLog, Content: content,
		MaxTurns: agent.MaxTurnsLimit, Tools: []*agent.Tool{
			agent.NewTool("read_logs", "Read one page of a service's logs.", readLogs, agent.ReadOnly()),
		}}
	return loom.NewFlow(agentFlowID, func(ctx *loom.Context, in agentInput) (agentOutcome, error) {
		r, err := agent.Run(ctx, cfg, llm.UserText(agentPrompt))
		if err != nil {
			return agentOutcome{}, err
		}
		if in.Park {
			if _, err := loom.Suspend[bool](ctx, agentGate); err != nil {
				return agentOutcome{}, err
			}
		}
		return agentOutcome{Turns: r.Turns, Stop: r.Stop, Text: r.Text}, nil
	}, agent.FlowOptions(cfg)...)
}

// agentAnswer is the model's last answer, after the tool turns.
const agentAnswer = "The checkout pool is exhausted: every page shows connections waited 2400 ms. Raise the pool or shed load."

// agentScript is the model's side of a run of toolTurns tool turns: one
// read_logs call per turn (page n, a tool_use id of its own), then the
// answer. Input tokens grow with the transcript, as an API counts them.
func agentScript(toolTurns int) []llmtest.Reply {
	out := make([]llmtest.Reply, 0, toolTurns+1)
	for n := 1; n <= toolTurns; n++ {
		out = append(out, llmtest.Reply{Response: llm.Response{Model: agentModel, StopReason: llm.StopToolUse,
			Usage: llm.Usage{InputTokens: int64(400 + 600*n), OutputTokens: 40},
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("toolu_%04d", n), Name: "read_logs",
				Arguments: []byte(`{"service":"checkout","page":` + strconv.Itoa(n) + `}`)}}}})
	}
	return append(out, llmtest.Reply{Response: llm.Response{Model: agentModel, Text: agentAnswer, StopReason: llm.StopEnd,
		Usage: llm.Usage{InputTokens: int64(400 + 600*(toolTurns+1)), OutputTokens: 60}}})
}

// agentProvider is a provider aimed at srv, as an app would build one
// (anthropic's default HTTP client, its own connection pool).
func agentProvider(srv *anthropictest.Server) (*anthropic.Provider, error) {
	return anthropic.New(anthropic.Options{Credential: llm.Credential{Key: agentAPIKey}, BaseURL: srv.URL()})
}

// agentProcess is one process over a run's SQLite file: the storage
// (plugin defaults, snapshot store), its event store behind the counting
// decorator, a provider aimed at the fake server and a runtime with the
// agent's flow under StepDurable. The warning log fails a run in which the
// runtime complained (a replay that diverged, a snapshot ignored).
type agentProcess struct {
	db       *sqlite.DB
	events   *countingStore
	raw      *sqlite.EventStore // the same store, for the harness's subscriptions
	snaps    *sqlite.SnapshotStore
	warnings *warningLog
	rt       *loom.Runtime
}

// openAgentProcess opens (creating) the database at path and builds a
// runtime over it whose agent asks srv.
func openAgentProcess(path string, sync sqlite.Synchronous, srv *anthropictest.Server, mode agentLogMode) (*agentProcess, error) {
	p, err := agentProvider(srv)
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(path, sqlite.WithSynchronous(sync))
	if err != nil {
		return nil, err
	}
	a := &agentProcess{db: db, raw: db.EventStore(), snaps: db.SnapshotStore(), warnings: &warningLog{}}
	a.events = &countingStore{EventStore: a.raw}
	cfg := loom.Config{Events: a.events, Snapshots: a.snaps, Flows: []*loom.Flow{agentTurnsFlow(p, mode.toolLog, nil)},
		Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(a.warnings)}
	if mode.claimed {
		content := db.ContentStore()
		cfg.Flows = []*loom.Flow{agentTurnsFlow(p, mode.toolLog, content)}
		cfg.Middleware = []effect.Middleware{middleware.ClaimCheck(content, middleware.ClaimCheckOptions{ToolIDs: []string{"tool:read_logs"}})}
	}
	a.rt, err = loom.New(cfg)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return a, nil
}

// Close closes the runtime, then the storage, as a process exiting would.
func (a *agentProcess) Close() error {
	err := a.rt.Close()
	return errors.Join(err, a.db.Close())
}

// healthy fails if the runtime logged a warning.
func (a *agentProcess) healthy() error {
	if n, first := a.warnings.read(); n > 0 {
		return fmt.Errorf("the runtime logged %d warning(s), the first: %s", n, first)
	}
	return nil
}

// checkOutcome fails unless the flow's output says the agent made
// toolTurns tool turns and then answered.
func checkOutcome(o agentOutcome, toolTurns int) error {
	if o.Turns != toolTurns+1 || o.Stop != agent.StopEnd || !strings.HasPrefix(o.Text, "The checkout pool") {
		return fmt.Errorf("the agent ended after %d turns (%s), want %d turns ending %s", o.Turns, o.Stop, toolTurns+1, agent.StopEnd)
	}
	return nil
}
