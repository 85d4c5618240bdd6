package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// tellStart narrates act 1 from the log the exited start process left, and
// returns the sequence of the park.
func (d *demo) tellStart(id string, pid int) (int64, error) {
	s, err := d.c.open(false)
	if err != nil {
		return 0, err
	}
	h, err := readHistory(d.c.ctx, s.stores.Events, id)
	if cerr := s.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	in, err := h.input()
	if err != nil {
		return 0, err
	}
	d.say("Started incident %s for %s: %s (process %d).", id, in.Service, in.Symptom, pid)

	var sig Signals
	if d.check(h.output(stepCollect, &sig) == nil, "collect-signals has no recorded output") {
		deploys := "no deploy in the last hour"
		for _, dep := range sig.Deploys {
			deploys = fmt.Sprintf("deploy %s %d min before the onset", dep.Version, dep.MinutesBeforeOnset)
		}
		d.say("Collected signals (step %s, before the agent): p99 %dms against a %dms baseline, %s errors, connection pool %d/%d, %s.",
			stepCollect, sig.P99Ms, sig.BaselineP99Ms, permille(sig.ErrorPermille), sig.PoolInUse, sig.PoolSize, deploys)
	}
	park, pe, ok := h.park()
	if !d.check(ok, "the log holds no park at an approval gate") {
		return 0, d.result()
	}
	turns := d.tellTurns(h, 1, pe.Sequence)
	d.check(turns > 0, "the log holds no model turn of the planner")

	if req, re, ok := h.approvalRequest(park.On); d.check(ok, "no %s announces the call of gate %s", agent.ApprovalRequestEvent, park.On) {
		d.check(req.Gate == agent.GateFor(req.Tool, req.Digest), "the gate %s is not named after the call's digest %s", req.Gate, req.Digest)
		digest, err := agent.CallDigest(req.Agent, req.StepID, req.Tool, req.Arguments)
		d.check(err == nil && digest == req.Digest, "the announced digest %s is not the call's (%s)", req.Digest, digest)
		d.say("Recorded %s (#%d) for call %s: %s %s, digest %s. Only an answer naming its gate, %s, can open it.",
			agent.ApprovalRequestEvent, re.Sequence, req.StepID, req.Tool, req.Arguments, req.Digest[:19]+"…", shortGate(req.Gate))
	}
	st := fold.Fold(h.events)
	wait := ""
	if park.TimeoutMs != nil {
		wait = ", waiting up to " + hours(time.Duration(*park.TimeoutMs)*time.Millisecond)
	}
	d.check(st.Status == fold.StatusSuspended, "after the start process exited the execution is %s, not suspended", st.Status)
	d.say("Parked at that gate (#%d%s); process %d exited while the execution was %s.", pe.Sequence, wait, pid, st.Status)
	return pe.Sequence, nil
}

// tellTurns narrates the planner's turns recorded from turn first on,
// before sequence to, and returns how many it told.
func (d *demo) tellTurns(h history, first int, to int64) int {
	n := 0
	for turn := first; ; turn++ {
		resp, p, ok := h.modelTurn(turn)
		if !ok {
			return n
		}
		if _, se, _ := h.stepStart(modelStepID(turn)); se.Sequence >= to {
			return n
		}
		n++
		who := fmt.Sprintf("Turn %d", turn)
		if turn == 1 {
			who = fmt.Sprintf("The planner (agent %q) asked its model, turn 1", plannerID)
		}
		line := fmt.Sprintf("%s (step %s, %s): %q", who, modelStepID(turn), p.ToolID, resp.Text)
		if len(resp.ToolCalls) == 0 {
			d.say("%s — its answer, with no tool call (stop: %s).", line, resp.StopReason)
			continue
		}
		d.say("%s%s", line, d.tellCalls(h, turn, resp.ToolCalls))
	}
}

// tellCalls describes a turn's tool calls and what each answered.
func (d *demo) tellCalls(h history, turn int, calls []llm.ToolCall) string {
	branches := 0
	var b strings.Builder
	for i, c := range calls {
		step := fmt.Sprintf("%s/turn:%d/tool:%d", plannerID, turn, i)
		p, _, started := h.stepStart(step)
		if p.Branch != "" {
			branches++
		}
		fmt.Fprintf(&b, "\n     %-17s %s", c.Name, short(c.Arguments, 60))
		var out json.RawMessage
		switch {
		case !started:
			if c.Name == toolApply {
				b.WriteString(" — needs approval: not run yet")
			} else {
				b.WriteString(" — not run")
			}
		case h.output(step, &out) != nil:
			b.WriteString(" — no outcome recorded")
		default:
			b.WriteString(" → " + toolAnswer(c.Name, out))
		}
		if strings.HasPrefix(p.ToolID, mcp.EffectName+":") {
			fmt.Fprintf(&b, " (over MCP: tool id %s)", p.ToolID)
		}
	}
	how := fmt.Sprintf(" It called %s:", plural(len(calls), "tool"))
	if len(calls) > 1 && branches == len(calls) {
		how = fmt.Sprintf(" It called %d tools in that one turn, run as %d parallel branches:", len(calls), branches)
	}
	return how + b.String()
}

// toolAnswer renders what a tool answered, briefly.
func toolAnswer(tool string, out json.RawMessage) string {
	switch tool {
	case toolDiagnoseLogs, toolDiagnoseMetrics, toolDiagnoseDeploys:
		var dg Diagnosis
		if json.Unmarshal(out, &dg) == nil && dg.Finding != "" {
			return fmt.Sprintf("%s (%d%%)", dg.Finding, dg.Confidence)
		}
	case toolPropose:
		var p Proposal
		if json.Unmarshal(out, &p) == nil && len(p.Plans) > 0 {
			opts := make([]string, len(p.Plans))
			for i, pl := range p.Plans {
				opts[i] = fmt.Sprintf("%s (%s risk)", pl.Variant, pl.Risk)
			}
			return strings.Join(opts, ", ")
		}
	case runbookToolName:
		var rb Runbook
		if json.Unmarshal(out, &rb) == nil && rb.ID != "" {
			return fmt.Sprintf("runbook %s %q, %s, applies %s", rb.ID, rb.Title, plural(len(rb.Steps), "step"), rb.Variant)
		}
	case toolApply:
		var f FixResult
		if json.Unmarshal(out, &f) == nil && f.Change != "" {
			return f.Detail + " — change " + f.Change
		}
	}
	return short(out, 80)
}

// tellResume narrates act 2, proving "served from the log" by which steps
// the log says were started after the resume, and by the lookups each
// child's runbook server answered (as the child reported them).
func (d *demo) tellResume(h history, startPID, pid int, lookups [2]int) {
	a, re, ok := h.answer()
	if !d.check(ok, "the log holds no answer to the approval gate") {
		return
	}
	d.check(pid != startPID, "the resume ran in the same process id %d as the start", pid)
	before := h.startedIDs(0, re.Sequence)
	afterIDs := h.startedIDs(re.Sequence, 1<<62)
	var rerun []string
	for _, id := range afterIDs {
		if slices.Contains(before, id) {
			rerun = append(rerun, id)
		}
	}
	decided := h.decisionsIn(re.Sequence, 1<<62)
	if d.check(len(rerun) == 0 && len(decided) == 0, "steps or decisions recorded before the gate ran again after it: %v %v", rerun, decided) {
		d.say("New process %d resumed it with %s by %s (#%d). The %d steps recorded before the park — the model's turns among them — "+
			"were served from the log, not re-run: after #%d the log records no STEP_STARTED for them and no new decision; process %d started only %s.",
			pid, decisionText(a.Decision), a.By, re.Sequence, len(before), re.Sequence, pid, listOrNone(afterIDs))
	} else {
		d.say("New process %d resumed it with %s by %s (#%d) and re-ran %s.", pid, decisionText(a.Decision), a.By, re.Sequence, listOrNone(append(rerun, decided...)))
	}
	if step, ok := h.stepOfTool(runbookToolID); ok {
		d.check(lookups[0] == 1, "the start process's runbook server answered %d lookups, want 1", lookups[0])
		if d.check(lookups[1] == 0, "the resuming process's runbook server answered %d lookups, want 0: the recorded lookup ran again", lookups[1]) {
			d.say("The runbook lookup (step %s, %s) went through MCP once: process %d's runbook server answered %d lookup; "+
				"process %d started its own server, and it answered %d — the recorded call was served from the log.",
				step, runbookToolID, startPID, lookups[0], pid, lookups[1])
		}
	}
	sum, ok := h.summary()
	if !d.check(ok, "the execution did not complete") {
		return
	}
	if sum.Planner.Call != "" {
		var fix FixResult
		if _, se, started := h.stepStart(sum.Planner.Call); started && h.output(sum.Planner.Call, &fix) == nil {
			d.say("Applied the fix (tool %s, step %s, non-idempotent, started at #%d): %s — change %s.",
				toolApply, sum.Planner.Call, se.Sequence, strings.TrimPrefix(fix.Detail, "applied: "), fix.Change)
		}
	}
	if turn, _, ok := plannerStep(sum.Planner.Call); ok {
		d.tellTurns(h, turn+1, 1<<62)
	}
	var rec Recovery
	if h.output(stepVerify, &rec) == nil {
		d.say("Checked recovery (step %s, after the agent): p99 %dms, %s errors — %s.", stepVerify, rec.P99Ms, permille(rec.ErrorPermille),
			map[bool]string{true: "recovered", false: "not recovered"}[rec.Recovered])
	}
	end, _ := h.last(event.ExecutionCompleted)
	d.check(sum.Outcome == outcomeFixed, "the approved incident ended %s, not fixed", sum.Outcome)
	d.say("Completed (#%d): %s; process %d exited. %d events in the log; the planner ran %s in %d model turns.",
		end.Sequence, sum.Outcome, pid, len(h.events), sum.Planner.Model, sum.Planner.Turns)
}

// tellFork prints the fork's outcome next to the original's.
func (d *demo) tellFork(original, fork history, at int64, fv verification) {
	orig, _ := original.summary()
	fs, ok := fork.summary()
	if !d.check(ok, "the fork did not complete") {
		return
	}
	d.check(fs.Outcome == outcomeEscalated && fs.Simulated, "the rejected fork ended %s (simulated %v), not a simulated escalation", fs.Outcome, fs.Simulated)
	d.check(fork.simulated(), "the fork's events are not marked simulate")
	fmt.Fprintf(d.c.stdout, "Fork at #%d (simulated): rejected → %s; original: approved → %s\n\n", at, fs.Outcome, orig.Outcome)

	oa, ore, _ := original.answer()
	fa, fre, _ := fork.answer()
	tw := tabwriter.NewWriter(d.c.stdout, 0, 0, 3, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, "   "+strings.Join(cells, "\t")) }
	row("", "original "+original.id, "fork "+fork.id+" (simulated)")
	row("answer at the gate", answerText(oa), answerText(fa))
	forkSteps := describeSteps(fork.startedIDs(fre.Sequence, 1<<62))
	if fork.simulated() {
		forkSteps += " (simulation)"
	}
	copied := fmt.Sprintf("%d", len(fork.events))
	if int64(len(fork.events)) > at+1 && fork.events[at+1].Type == loom.ForkMarker {
		copied += fmt.Sprintf(" (#0–#%d copied, #%d the fork marker)", at, at+1)
	}
	row("steps after the gate", describeSteps(original.startedIDs(ore.Sequence, 1<<62)), forkSteps)
	row("the model's last turn", plannerText(orig.Planner), plannerText(fs.Planner))
	row("outcome", outcomeText(orig), outcomeText(fs))
	row("events", fmt.Sprint(len(original.events)), copied)
	row("re-fold", "byte-identical", "byte-identical ("+fv.digest[:19]+"…)")
	if err := tw.Flush(); err != nil {
		d.check(false, "printing the table: %v", err)
	}
}

// answerText is an approver's answer, in a table cell.
func answerText(a agent.Answer) string {
	switch a.Decision {
	case agent.DecisionApprove:
		return "approved by " + a.By
	case agent.DecisionEdit:
		return fmt.Sprintf("edited by %s: %s", a.By, a.Arguments)
	}
	return fmt.Sprintf("rejected by %s: %q", a.By, a.Reason)
}

// plannerText is how the planner's run ended, in a table cell.
func plannerText(p PlannerRun) string {
	if p.Note != "" {
		return fmt.Sprintf("turn %d; then %s", p.Turns, p.Note)
	}
	return fmt.Sprintf("turn %d, stop %s", p.Turns, p.Stop)
}

// outcomeText is how an incident ended, in a table cell.
func outcomeText(s Summary) string {
	switch {
	case s.Fix != nil:
		return fmt.Sprintf("%s (%s)", s.Outcome, s.Fix.Change)
	case s.Escalation != nil && s.Escalation.Simulated:
		return fmt.Sprintf("%s (would page %s, %s)", s.Outcome, s.Escalation.Team, s.Escalation.Ticket)
	case s.Escalation != nil:
		return fmt.Sprintf("%s (paged %s, %s)", s.Outcome, s.Escalation.Team, s.Escalation.Ticket)
	}
	return s.Outcome
}

// plural renders a count with its noun: "1 tool", "3 tools".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
