package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/llm"
)

// The scripted model: a deterministic stand-in for an LLM, used to record
// the committed cassette (testdata/cassettes/planner.json) and, with
// -provider scripted, to plan any incident offline. It plays the part the
// old scripted "model.propose" step played, but as a model behind the
// provider SPI: it reads the conversation and answers the next turn with
// the tool calls, and finally the summary, that a good model would give.
// Its answer is a pure function of the request — no clock, no randomness,
// no state — so recording the same scenarios twice gives the same bytes.

// The scripted model's identity.
const (
	// scriptedProvider is the provider name the scripted model answers
	// under: a replayed cassette recorded from it answers under it too.
	scriptedProvider = "scripted"
	// scriptedModelName is the model the planner asks the scripted model
	// for.
	scriptedModelName = "incident-planner-1"
)

// scriptedModel is the scripted model as an llm.Provider.
type scriptedModel struct{}

// Name implements llm.Provider.
func (scriptedModel) Name() string { return scriptedProvider }

// Complete implements llm.Provider: the next turn of the conversation. A
// streamed call gets the text, then each call's arguments, as deltas.
func (scriptedModel) Complete(ctx context.Context, req llm.Request, sink func(llm.Delta)) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	resp := scriptedAnswer(req)
	if sink != nil {
		if resp.Text != "" {
			sink(llm.Delta{Text: resp.Text})
		}
		for i, c := range resp.ToolCalls {
			sink(llm.Delta{ToolIndex: i, ToolID: c.ID, ToolName: c.Name, Arguments: string(c.Arguments)})
		}
	}
	return resp, nil
}

// scriptedAnswer is the scripted model's answer to req: diagnose (three
// calls in one turn), propose (with the runbook lookup, when the request
// offers it, in the same turn), apply, conclude — whichever comes next.
func scriptedAnswer(req llm.Request) llm.Response {
	svc := serviceOf(req.Messages)
	results := latestResults(req.Messages)
	turn := 1
	for _, m := range req.Messages {
		if m.Role == llm.RoleAssistant {
			turn++
		}
	}
	resp := llm.Response{Model: req.Model, StopReason: llm.StopEnd}
	call := func(name string, args any) {
		raw, _ := json.Marshal(args) // the argument types always encode
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: fmt.Sprintf("call_%d_%d", turn, len(resp.ToolCalls)), Name: name, Arguments: raw})
		resp.StopReason = llm.StopToolUse
	}
	_, diagnosed := results[toolDiagnoseLogs]
	_, proposed := results[toolPropose]
	_, applied := results[toolApply]
	switch {
	case svc == "":
		resp.Text = "The incident names no service, so there is nothing I can diagnose."
	case !diagnosed:
		resp.Text = fmt.Sprintf("Checking the logs, the metrics and the recent deploys of %s at once.", svc)
		for _, name := range []string{toolDiagnoseLogs, toolDiagnoseMetrics, toolDiagnoseDeploys} {
			call(name, serviceArgs{Service: svc})
		}
	case !proposed:
		ds := diagnosesIn(results)
		if len(ds) == 0 {
			resp.Text = "No diagnosis came back, so I cannot propose a fix. The on-call team should look."
			break
		}
		best := mostConfident(ds)
		resp.Text = fmt.Sprintf("Likely cause (from %s, %d%%): %s. Asking for the plans that address %s.",
			best.Source, best.Confidence, best.Finding, suspectText(best.Suspect))
		call(toolPropose, proposeArgs{Service: svc, Cause: best.Suspect})
		if offered(req, runbookToolName) {
			resp.Text = strings.TrimSuffix(resp.Text, ".") + ", and for the team's runbook (over MCP)."
			call(runbookToolName, lookupArgs{Service: svc, Cause: best.Suspect})
		}
	case !applied:
		var p Proposal
		if results[toolPropose].IsError || json.Unmarshal([]byte(results[toolPropose].Content), &p) != nil || len(p.Plans) == 0 {
			resp.Text = "propose_fix listed no plan, so I apply nothing. The on-call team should look."
			break
		}
		plan := p.Plans[0]
		resp.Text = fmt.Sprintf("Recommended: %s (%s risk). Asking to apply it.", plan.Action, plan.Risk)
		if rb, ok := runbookIn(results); ok {
			plan = runbookPlan(p, rb)
			resp.Text = fmt.Sprintf("Recommended: %s (%s risk), the fix runbook %s (%s) prescribes. Asking to apply it.",
				plan.Action, plan.Risk, rb.ID, rb.Title)
		}
		call(toolApply, applyArgs{Service: svc, Variant: plan.Variant})
	default:
		resp.Text = conclusion(results[toolApply], svc)
	}
	resp.Usage = llm.Usage{InputTokens: int64(requestBytes(req)/4 + 1), OutputTokens: int64(answerBytes(resp)/4 + 1)}
	return resp
}

// conclusion is the last turn: what became of apply_fix. It never quotes
// a rejection's reason or a change id: those differ between runs, and the
// cassette serves this answer to all of them (see scrubRequest).
func conclusion(r llm.ToolResult, svc string) string {
	if !r.IsError {
		var f FixResult
		if json.Unmarshal([]byte(r.Content), &f) != nil {
			return "apply_fix answered something I cannot read; check " + svc + " by hand."
		}
		return fmt.Sprintf("Done: %s. The flow now checks that %s recovers.", strings.TrimPrefix(f.Detail, "applied: "), svc)
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(r.Content), &e)
	if strings.HasPrefix(e.Error, rejectedPrefix) {
		return "The fix was not approved, so I apply nothing else. The on-call team is paged with the diagnoses above."
	}
	return "apply_fix failed, so I apply nothing else. The on-call team is paged with the diagnoses above."
}

// offered reports whether req offers the model a tool named name.
func offered(req llm.Request, name string) bool {
	for _, t := range req.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// runbookIn decodes the runbook lookup's successful answer, if any.
func runbookIn(results map[string]llm.ToolResult) (Runbook, bool) {
	var rb Runbook
	r, ok := results[runbookToolName]
	return rb, ok && !r.IsError && json.Unmarshal([]byte(r.Content), &rb) == nil && rb.ID != ""
}

// runbookPlan is the plan of propose_fix's the runbook applies, else the
// first one listed.
func runbookPlan(p Proposal, rb Runbook) Plan {
	for _, plan := range p.Plans {
		if plan.Variant == rb.Variant {
			return plan
		}
	}
	return p.Plans[0]
}

// serviceOf reads the "Service:" line of the opening user message.
func serviceOf(msgs []llm.Message) string {
	for _, m := range msgs {
		if m.Role != llm.RoleUser {
			continue
		}
		for _, line := range strings.Split(m.Text, "\n") {
			if s, ok := strings.CutPrefix(line, "Service: "); ok {
				return strings.TrimSpace(s)
			}
		}
		return ""
	}
	return ""
}

// latestResults maps each tool name to the last result the conversation
// holds for it.
func latestResults(msgs []llm.Message) map[string]llm.ToolResult {
	out := map[string]llm.ToolResult{}
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			out[r.Name] = r
		}
	}
	return out
}

// diagnosesIn decodes the diagnose tools' successful answers, in source
// order.
func diagnosesIn(results map[string]llm.ToolResult) []Diagnosis {
	var ds []Diagnosis
	for _, name := range []string{toolDiagnoseLogs, toolDiagnoseMetrics, toolDiagnoseDeploys} {
		var d Diagnosis
		if r, ok := results[name]; ok && !r.IsError && json.Unmarshal([]byte(r.Content), &d) == nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// suspectText names a suspect in a sentence.
func suspectText(suspect string) string {
	if s, ok := map[string]string{"deploy": "a deploy", "saturation": "saturation", "memory": "memory"}[suspect]; ok {
		return s
	}
	return "no particular cause"
}

// requestBytes is the size of req's JSON: the scripted input tokens are a
// quarter of it.
func requestBytes(req llm.Request) int {
	raw, _ := json.Marshal(req) // a Request always encodes
	return len(raw)
}

// answerBytes is the size of an answer's text and calls: the scripted
// output tokens are a quarter of it.
func answerBytes(resp llm.Response) int {
	n := len(resp.Text)
	for _, c := range resp.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return n
}
