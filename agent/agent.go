package agent

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/store"
)

// Limits of a run.
const (
	// DefaultMaxTurns bounds the model calls of a run when Config.MaxTurns
	// is 0.
	DefaultMaxTurns = 16
	// MaxTurnsLimit is the most turns a run may ask for.
	MaxTurnsLimit = 1000
	// MaxToolCallsPerTurn bounds the tool calls one model answer may make;
	// the rest are answered with an error result.
	MaxToolCallsPerTurn = 64
	// DefaultWarnTranscriptBytes is Config.WarnTranscriptBytes when 0.
	DefaultWarnTranscriptBytes = 256 << 10
)

// ToolLog is how the tool-call log keeps each call's output.
type ToolLog string

const (
	// ToolLogFull keeps every output in the log entry.
	ToolLogFull ToolLog = "full"
	// ToolLogLean keeps {status, bytes, digest, stepId} instead: the output
	// itself stays where replay needs it, in the tool step's record.
	ToolLogLean ToolLog = "lean"
)

// Budget caps a run's own consumption, as the model reported it; the run
// stops (Stop "budget") before a turn that would start over a cap. 0 is no
// cap. The kernel's metering ring (middleware.Metering) caps the whole
// execution and denies the call instead.
type Budget struct {
	Tokens  int64
	CostUSD float64
}

// Config is one agent: its model, instructions, tools and limits.
type Config struct {
	// ID names the agent: its step ids are "<ID>/turn:<n>/model" and
	// "<ID>/turn:<n>/tool:<i>", its gates and records carry it. Give each
	// run in one execution its own ID.
	ID       string
	Provider llm.Provider
	Model    string
	System   string
	Tools    []*Tool
	// MaxTurns bounds the model calls (default DefaultMaxTurns).
	MaxTurns int
	// MaxTokens bounds each answer (0: the provider's default).
	MaxTokens int
	Budget    Budget
	// Deadline bounds the run's duration on the runtime's recorded clock;
	// the run stops (Stop "deadline") before a turn past it. 0 is none.
	Deadline time.Duration
	// Sequential runs a turn's tool calls one after another instead of as a
	// Parallel block.
	Sequential bool
	// ToolLog is ToolLogFull (default) or ToolLogLean.
	ToolLog ToolLog
	// Compactor, when set, shortens the transcript before a turn whose
	// request would exceed CompactAtBytes.
	Compactor      Compactor
	CompactAtBytes int
	// WarnTranscriptBytes is the transcript size past which the run records
	// one agent.transcript.large warning (DefaultWarnTranscriptBytes; -1
	// never warns).
	WarnTranscriptBytes int
	// ApprovalTimeout bounds each approval wait (needs loom.Config.Timers);
	// an unanswered approval is a rejection. 0 waits for ever.
	ApprovalTimeout time.Duration
	// CallOptions are passed to every model call (streaming, retry, prices).
	CallOptions []llm.CallOption
	// Content is the content store of the app's claim-check ring
	// (middleware.ClaimCheck): a tool output the ring claimed is recorded as
	// its claim, and the model is told the content, read from here (also on
	// replay). Without it the model is told the claim.
	Content store.ContentStore
}

// Stop is why a run ended.
type Stop string

// The ends of a run.
const (
	StopEnd      Stop = "end"      // the model answered without calling a tool
	StopMaxTurns Stop = "maxTurns" // MaxTurns model calls were made
	StopBudget   Stop = "budget"   // a Budget cap was reached
	StopDeadline Stop = "deadline" // the Deadline passed
)

// Result is a finished run.
type Result struct {
	// Text is the model's last answer.
	Text      string          `json:"text"`
	Stop      Stop            `json:"stop"`
	Turns     int             `json:"turns"`
	Usage     llm.Usage       `json:"usage"`
	CostUSD   float64         `json:"costUsd,omitempty"`
	ToolCalls []ToolCallEntry `json:"toolCalls,omitempty"`
	// Messages is the transcript, the model's answers and the tool results
	// included (after any compaction).
	Messages []llm.Message `json:"messages"`
}

// Run runs the agent loop in flow ctx: ask the model, run the tools it
// calls, feed their results back, until it answers without a tool call or a
// limit stops it.
//
// Every model turn is an llm.Complete step and every tool call a step with
// a deterministic id from the turn and the call's index, so a crash, a
// resume or a fork re-runs the loop with each recorded turn and completed
// tool served from the log: no model is asked again for a turn the log
// holds and no completed tool runs again. A turn's tool calls run as a
// Parallel block (Sequential runs them in order); approvals are asked in
// call order before any of them runs.
//
// A tool's failure, an unknown tool name and arguments that do not match a
// tool's schema are fed back to the model as error results; they never fail
// the run. A model call's typed failure (llm.FailureOf), a budget denial of
// the metering ring, a tool's failure on one of its declared channels and a
// cancelled execution end the run with that error.
func Run(ctx *loom.Context, cfg Config, messages ...llm.Message) (Result, error) {
	a, err := newRun(ctx, cfg, messages)
	if err != nil {
		return Result{}, err
	}
	return a.loop()
}

// run is one agent run's working state.
type run struct {
	ctx    *loom.Context
	cfg    Config
	tools  map[string]*Tool
	defs   []llm.Tool
	res    Result
	start  time.Time
	warned bool
	// chain digests the transcript as it grows (one link per message), and
	// size is its JSON size: both cost O(new messages) per turn. A
	// compaction starts them again.
	chain llm.Chain
	size  int
}

func newRun(ctx *loom.Context, cfg Config, messages []llm.Message) (*run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxTurns == 0 {
		cfg.MaxTurns = DefaultMaxTurns
	}
	if cfg.ToolLog == "" {
		cfg.ToolLog = ToolLogFull
	}
	if cfg.WarnTranscriptBytes == 0 {
		cfg.WarnTranscriptBytes = DefaultWarnTranscriptBytes
	}
	a := &run{ctx: ctx, cfg: cfg, tools: map[string]*Tool{}}
	for _, t := range cfg.Tools {
		a.tools[t.name] = t
		a.defs = append(a.defs, t.Definition())
	}
	a.add(messages...)
	if cfg.Deadline > 0 {
		a.start = loom.Now(ctx)
	}
	return a, nil
}

// ConfigError is a Config that cannot run: which field, and why.
type ConfigError struct {
	Agent  string
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("agent %q: %s: %s", e.Agent, e.Field, e.Reason)
}

// Validate checks cfg as Run will, without running anything: call it where
// the flow is built, so a bad Config fails the program's start instead of
// an execution. The error is a *ConfigError.
func (cfg Config) Validate() error {
	bad := func(field, reason string) error { return &ConfigError{Agent: cfg.ID, Field: field, Reason: reason} }
	switch {
	case cfg.ID == "":
		return bad("ID", "empty: name the agent (its step ids start with it)")
	case cfg.Provider == nil:
		return bad("Provider", "nil: give it an llm.Provider (a plugin, a cassette)")
	case cfg.Model == "":
		return bad("Model", "empty: name the model to ask")
	case cfg.MaxTurns < 0 || cfg.MaxTurns > MaxTurnsLimit:
		return bad("MaxTurns", fmt.Sprintf("%d is outside 1..%d (0 is %d)", cfg.MaxTurns, MaxTurnsLimit, DefaultMaxTurns))
	case cfg.ToolLog != "" && cfg.ToolLog != ToolLogFull && cfg.ToolLog != ToolLogLean:
		return bad("ToolLog", fmt.Sprintf("%q is neither full nor lean", cfg.ToolLog))
	}
	seen := map[string]bool{}
	for i, t := range cfg.Tools {
		switch {
		case t == nil || t.name == "":
			return bad(fmt.Sprintf("Tools[%d]", i), "a tool without a name")
		case seen[t.name]:
			return bad(fmt.Sprintf("Tools[%d]", i), fmt.Sprintf("a second tool named %q", t.name))
		case t.schemaErr() != nil:
			return bad(fmt.Sprintf("Tools[%d]", i), fmt.Sprintf("tool %q: %v", t.name, t.schemaErr()))
		case t.invoke == nil && t.toolID == "":
			return bad(fmt.Sprintf("Tools[%d]", i), fmt.Sprintf("tool %q runs nothing: build it with NewTool or EffectTool", t.name))
		}
		seen[t.name] = true
	}
	return nil
}

func (a *run) loop() (Result, error) {
	for turn := 1; ; turn++ {
		if stop, ok := a.limit(turn); ok {
			a.res.Stop = stop
			return a.res, nil
		}
		if err := a.compact(turn); err != nil {
			return a.res, err
		}
		req := llm.Request{Model: a.cfg.Model, System: a.cfg.System, Messages: a.res.Messages, Tools: a.defs, MaxTokens: a.cfg.MaxTokens}
		a.warnIfLarge(turn)
		opts := append([]llm.CallOption{llm.WithChain(&a.chain)}, a.cfg.CallOptions...)
		resp, err := llm.Complete(a.ctx, a.stepID(turn, "model"), a.cfg.Provider, req, opts...)
		if err != nil {
			return a.res, err
		}
		a.res.Turns = turn
		a.account(resp)
		a.res.Text = resp.Text
		a.add(resp.Message())
		if len(resp.ToolCalls) == 0 {
			a.res.Stop = StopEnd
			return a.res, a.record(turn, resp, nil)
		}
		entries, results, err := a.callTools(turn, resp.ToolCalls)
		if err != nil {
			return a.res, err
		}
		a.res.ToolCalls = append(a.res.ToolCalls, entries...)
		a.add(llm.Message{Role: llm.RoleTool, ToolResults: results})
		if err := a.record(turn, resp, entries); err != nil {
			return a.res, err
		}
	}
}

// add appends messages to the transcript and counts their bytes.
func (a *run) add(msgs ...llm.Message) {
	for _, m := range msgs {
		a.res.Messages = append(a.res.Messages, m)
		a.size += len(marshal(m)) + 1
	}
}

// reset replaces the transcript (a compaction): its digest chain and size
// start again.
func (a *run) reset(msgs []llm.Message) {
	a.res.Messages, a.chain, a.size = nil, llm.Chain{}, 0
	a.add(msgs...)
}

// limit says whether a limit stops the run before turn.
func (a *run) limit(turn int) (Stop, bool) {
	switch {
	case turn > a.cfg.MaxTurns:
		return StopMaxTurns, true
	case a.cfg.Budget.Tokens > 0 && a.res.Usage.Total() >= a.cfg.Budget.Tokens,
		a.cfg.Budget.CostUSD > 0 && a.res.CostUSD >= a.cfg.Budget.CostUSD:
		return StopBudget, true
	case a.cfg.Deadline > 0 && loom.Now(a.ctx).Sub(a.start) >= a.cfg.Deadline:
		return StopDeadline, true
	}
	return "", false
}

// account adds a turn's usage and its list price.
func (a *run) account(resp llm.Response) {
	u := &a.res.Usage
	u.InputTokens += resp.Usage.InputTokens
	u.OutputTokens += resp.Usage.OutputTokens
	u.CacheReadTokens += resp.Usage.CacheReadTokens
	u.CacheWriteTokens += resp.Usage.CacheWriteTokens
	model := resp.Model
	if model == "" {
		model = a.cfg.Model
	}
	if cost, ok := llm.DefaultPrices.Cost(a.cfg.Provider.Name(), model, resp.Usage); ok {
		a.res.CostUSD += cost
	}
}

func (a *run) stepID(turn int, what string) string {
	return a.cfg.ID + "/turn:" + strconv.Itoa(turn) + "/" + what
}

// TurnEvent is the event type of a turn's record.
const TurnEvent = "agent.turn"

// TurnRecord is what a run records after each turn: the model's answer and
// the tool-call log entries of the turn.
type TurnRecord struct {
	Agent      string          `json:"agent"`
	Turn       int             `json:"turn"`
	Model      string          `json:"model"`
	StopReason llm.StopReason  `json:"stopReason"`
	Usage      llm.Usage       `json:"usage"`
	Text       string          `json:"text,omitempty"`
	ToolCalls  []ToolCallEntry `json:"toolCalls,omitempty"`
}

// record emits the turn's record (once per execution: a replay's emit of
// the same record is matched against the log, not appended again).
func (a *run) record(turn int, resp llm.Response, entries []ToolCallEntry) error {
	return a.ctx.Emit(TurnEvent, TurnRecord{Agent: a.cfg.ID, Turn: turn, Model: resp.Model, StopReason: resp.StopReason,
		Usage: resp.Usage, Text: resp.Text, ToolCalls: entries})
}

// marshal is json.Marshal for values known to encode.
func marshal(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return raw
}
