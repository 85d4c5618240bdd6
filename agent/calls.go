package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/middleware"
)

// Statuses of a tool call in the log.
const (
	StatusOK               = "ok"               // the tool ran and answered
	StatusError            = "error"            // the tool failed; the error was fed back
	StatusUnknownTool      = "unknownTool"      // the model named no tool of the run
	StatusInvalidArguments = "invalidArguments" // the arguments do not match the schema
	StatusRejected         = "rejected"         // the approver said no
	StatusTooMany          = "tooManyCalls"     // past MaxToolCallsPerTurn
)

// ToolCallEntry is one tool call in the tool-call log.
type ToolCallEntry struct {
	Turn      int             `json:"turn"`
	Index     int             `json:"index"`
	CallID    string          `json:"callId"`
	Tool      string          `json:"tool"`
	StepID    string          `json:"stepId,omitempty"`
	Arguments json.RawMessage `json:"arguments"`
	Status    string          `json:"status"`
	// Output is the tool's answer (or error text) in a full log; a lean log
	// keeps Bytes and Digest (sha256 of its canonical JSON) instead.
	Output   json.RawMessage `json:"output,omitempty"`
	Bytes    int             `json:"bytes,omitempty"`
	Digest   string          `json:"digest,omitempty"`
	Approval *ApprovalRecord `json:"approval,omitempty"`
}

// pending is one call of a turn on its way to a result.
type pending struct {
	entry  ToolCallEntry
	tool   *Tool
	args   json.RawMessage // the arguments to run with (an approver may edit them)
	run    bool            // the tool is to be called
	output json.RawMessage // the answer or error text, as the log holds it
	fed    []byte          // what the model is told, when not output (a claimed output's content)
	isErr  bool
}

// callTools answers a turn's tool calls: vetted and approved in order, then
// run (as a Parallel block unless Sequential), then logged.
func (a *run) callTools(turn int, calls []llm.ToolCall) ([]ToolCallEntry, []llm.ToolResult, error) {
	ps := make([]*pending, len(calls))
	for i, c := range calls {
		p := &pending{entry: ToolCallEntry{Turn: turn, Index: i, CallID: c.ID, Tool: c.Name, Arguments: nonEmpty(c.Arguments)}}
		ps[i] = p
		if err := a.vet(p, i); err != nil {
			return nil, nil, err
		}
	}
	var runs []*pending
	for _, p := range ps {
		if p.run {
			runs = append(runs, p)
		}
	}
	if err := a.runAll(runs); err != nil {
		return nil, nil, err
	}
	entries := make([]ToolCallEntry, len(ps))
	results := make([]llm.ToolResult, len(ps))
	for i, p := range ps {
		content := p.output
		if p.fed != nil {
			content = p.fed
		}
		results[i] = llm.ToolResult{CallID: p.entry.CallID, Name: p.entry.Tool, Content: string(content), IsError: p.isErr}
		entries[i] = a.logEntry(p)
	}
	return entries, results, nil
}

// vet resolves a call's tool, checks its arguments and asks for approval;
// what it refuses is answered with an error result and never runs.
func (a *run) vet(p *pending, i int) error {
	refuse := func(status, msg string) {
		p.entry.Status, p.output, p.isErr = status, marshal(map[string]string{"error": msg}), true
	}
	if i >= MaxToolCallsPerTurn {
		refuse(StatusTooMany, fmt.Sprintf("at most %d tool calls per turn; call it again in the next turn", MaxToolCallsPerTurn))
		return nil
	}
	t, ok := a.tools[p.entry.Tool]
	if !ok {
		refuse(StatusUnknownTool, fmt.Sprintf("there is no tool %q; the tools are %s", p.entry.Tool, strings.Join(a.toolNames(), ", ")))
		return nil
	}
	args, err := t.validate(p.entry.Arguments)
	if err != nil {
		refuse(StatusInvalidArguments, fmt.Sprintf("the arguments of %q do not match its schema: %v", t.name, err))
		return nil
	}
	p.tool, p.args, p.run = t, args, true
	p.entry.StepID = a.stepID(p.entry.Turn, "tool:"+strconv.Itoa(i))
	if !t.approval {
		return nil
	}
	rec, err := a.approve(p)
	if err != nil {
		return err
	}
	p.entry.Approval = &rec
	switch rec.Decision {
	case DecisionEdit:
		p.args = rec.Arguments
	case DecisionReject:
		p.run = false
		reason := rec.Reason
		if reason == "" {
			reason = "no reason given"
		}
		refuse(StatusRejected, "the call was rejected by its approver: "+reason)
	}
	return nil
}

// runAll runs the approved calls, at once as a Parallel block or in order.
func (a *run) runAll(runs []*pending) error {
	if len(runs) == 0 {
		return nil
	}
	if len(runs) == 1 || a.cfg.Sequential {
		for _, p := range runs {
			if err := a.call(a.ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	branches := make([]func(*loom.Context) error, len(runs))
	for i, p := range runs {
		branches[i] = func(c *loom.Context) error { return a.call(c, p) }
	}
	return a.ctx.Parallel(branches...)
}

// call runs one tool step. Its own failure becomes the error result the
// model sees; a failure on a declared channel, or the run's end, is the
// run's error.
func (a *run) call(c *loom.Context, p *pending) error {
	var input any = p.args
	if p.tool.shape != nil {
		shaped, err := p.tool.shape(p.args)
		if err != nil {
			return fmt.Errorf("agent %q: shaping the input of %s: %w", a.cfg.ID, p.entry.StepID, err)
		}
		input = shaped
	}
	out, err := c.Execute(p.tool.task(p.entry.StepID), input)
	if err == nil {
		// Canonical bytes: the model is told the same text live and on a
		// replay from a store that re-encodes JSON (PostgreSQL's jsonb), so
		// the next request, and its digest, do not change.
		if canon, cerr := event.Canonical(out); cerr == nil {
			out = canon
		}
		p.entry.Status, p.output = StatusOK, out
		return a.resolveClaim(c, p)
	}
	if tf, ok := asTyped(err); ok {
		if tf.Channel != channelToolError {
			return err
		}
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(tf.Payload, &e)
		p.entry.Status, p.output, p.isErr = StatusError, marshal(map[string]string{"error": e.Message}), true
		return nil
	}
	var quota *middleware.QuotaExceededError
	var se *loom.StepError
	if errors.As(err, &se) && !errors.As(err, &quota) && c.Context().Err() == nil {
		// An untyped failure (an effect tool's, or an authority denial): fed
		// back, and run again on replay like any untyped failure. A budget
		// denial ends the run.
		p.entry.Status, p.output, p.isErr = StatusError, marshal(map[string]string{"error": se.Message}), true
		return nil
	}
	return err
}

// resolveClaim tells the model a claim-checked output's content, read from
// Config.Content (the log keeps the claim).
func (a *run) resolveClaim(c *loom.Context, p *pending) error {
	if a.cfg.Content == nil {
		return nil
	}
	if _, ok := middleware.ParseClaim(p.output); !ok {
		return nil
	}
	content, err := middleware.Resolve(c.Context(), a.cfg.Content, p.output)
	if err != nil {
		return fmt.Errorf("agent %q: reading the claimed output of %s: %w", a.cfg.ID, p.entry.StepID, err)
	}
	p.fed = content
	return nil
}

// logEntry is the call's tool-call log entry, full or lean.
func (a *run) logEntry(p *pending) ToolCallEntry {
	e := p.entry
	if p.output == nil {
		return e
	}
	if a.cfg.ToolLog == ToolLogLean {
		e.Bytes = len(p.output)
		if canon, err := event.Canonical(p.output); err == nil {
			e.Digest = event.SHA256(canon)
		}
		return e
	}
	e.Output = p.output
	return e
}

func (a *run) toolNames() []string {
	names := make([]string, 0, len(a.tools))
	for n := range a.tools { //loom:sorted sorted below
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func asTyped(err error) (*loom.TypedFailure, bool) {
	var tf *loom.TypedFailure
	ok := errors.As(err, &tf)
	return tf, ok
}

func nonEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
