package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// The demo tells the whole story. start and approve run as child processes
// of this binary, so the exit between them is a real process exit; then
// this process verifies the stored log and forks it at the gate.
//
// Every numbered line is read back from the stored log (or the runtime)
// after the fact, and every claim that could be false is checked: a failed
// check is printed as such and makes the demo exit 1.

// demo is one run of the story.
type demo struct {
	c        *cli
	exe      string
	verbose  bool
	n        int      // the last line number
	failures []string // checks that did not hold
}

// say prints the next numbered line.
func (d *demo) say(format string, args ...any) {
	d.n++
	fmt.Fprintf(d.c.stdout, "%d. %s\n", d.n, fmt.Sprintf(format, args...))
}

// check records a claim that did not hold; it returns ok.
func (d *demo) check(ok bool, format string, args ...any) bool {
	if !ok {
		msg := fmt.Sprintf(format, args...)
		d.failures = append(d.failures, msg)
		fmt.Fprintf(d.c.stdout, "   ✗ check failed: %s\n", msg)
	}
	return ok
}

// child runs this binary with args as a child process and returns its pid
// once it has exited with status 0.
func (d *demo) child(args ...string) (int, error) {
	cmd := exec.CommandContext(d.c.ctx, d.exe, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	pid := 0
	if cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	line := "incident " + shellJoin(args)
	if err != nil {
		return pid, fmt.Errorf("the child process `%s` (pid %d) failed: %v\n%s%s", line, pid, err, out.String(), errOut.String())
	}
	fmt.Fprintf(d.c.stdout, "   $ %s   → process %d, exit status %d\n", line, pid, cmd.ProcessState.ExitCode())
	if d.verbose {
		for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
			fmt.Fprintf(d.c.stdout, "   │ %s\n", l)
		}
	}
	return pid, nil
}

func cmdDemo(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "also print what each child process printed")
	approver := fs.String("by", "alice", "who approves the original")
	rejecter := fs.String("rejecter", "bob", "who rejects the fork")
	in := Incident{}
	fs.StringVar(&in.Service, "service", defaultService, "the affected `service`")
	fs.StringVar(&in.Symptom, "symptom", defaultSymptom, "what is wrong (mention memory for the OOM scenario)")
	if _, err := c.flags(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run it as a child process: %w", err)
	}
	if err := removeDB(c.db); err != nil {
		return err
	}
	d := &demo{c: c, exe: exe, verbose: *verbose}
	id := newID("inc-", 8)
	fmt.Fprintf(c.stdout, "Incident demo: flow %s on a fresh SQLite file, %s (this is process %d).\n\n", flowID, c.db, os.Getpid())

	// Act 1: a child process starts the incident; it parks and the process exits.
	startPID, err := d.child("start", "-db", c.db, "-id", id, "-service", in.Service, "-symptom", in.Symptom)
	if err != nil {
		return err
	}
	parkSeq, err := d.tellStart(id, startPID)
	if err != nil {
		return err
	}

	// Act 2: another child process approves; the flow resumes there.
	fmt.Fprintln(c.stdout)
	approvePID, err := d.child("approve", id, "-db", c.db, "-by", *approver)
	if err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	original, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	d.tellResume(original, startPID, approvePID)

	// Act 3: re-fold the stored log from scratch, in this process.
	fmt.Fprintln(c.stdout)
	v, err := verifyExecution(c.ctx, s, id)
	if !d.check(err == nil, "%v", err) {
		return d.result()
	}
	fmt.Fprintf(c.stdout, "Verified: re-folding the %d stored events gives byte-identical state (%s); the runtime loaded it from %s.\n",
		v.events, v.digest, v.source())

	// Act 4: fork at the gate and answer the other way, simulated.
	forkID := newID(id+"-fork-", 4)
	if _, err := forkAt(c.ctx, s, id, parkSeq, forkID, true); err != nil {
		return err
	}
	no := Approval{Approved: false, By: *rejecter, Reason: "change freeze during the sale"}
	payload, err := json.Marshal(no)
	if err != nil {
		return err
	}
	if err := s.rt.Resume(c.ctx, forkID, loom.ResumeEvent{EventType: approvalGate, Payload: payload}); err != nil {
		return fmt.Errorf("resuming the fork: %w", err)
	}
	if _, err := s.rt.WaitForCompletion(c.ctx, forkID); err != nil {
		return fmt.Errorf("waiting for the fork: %w", err)
	}
	fork, err := readHistory(c.ctx, s.stores.Events, forkID)
	if err != nil {
		return err
	}
	after, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	d.check(len(after.events) == len(original.events), "the fork changed the original's log (%d → %d events)", len(original.events), len(after.events))
	fv, err := verifyExecution(c.ctx, s, forkID)
	d.check(err == nil, "the fork: %v", err)
	d.tellFork(original, fork, parkSeq, fv)
	d.handHints(id)
	return d.result()
}

// result fails the demo when a check did not hold.
func (d *demo) result() error {
	if len(d.failures) > 0 {
		return fmt.Errorf("%d check(s) of the story failed: %s", len(d.failures), strings.Join(d.failures, "; "))
	}
	return nil
}

// removeDB deletes the database file and its WAL companions, so the demo
// starts from nothing.
func removeDB(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the demo starts from a fresh database and could not remove %s: %w", p, err)
		}
	}
	return nil
}

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
		d.say("Collected signals: p99 %dms against a %dms baseline, %s errors, connection pool %d/%d, %s.",
			sig.P99Ms, sig.BaselineP99Ms, permille(sig.ErrorPermille), sig.PoolInUse, sig.PoolSize, deploys)
	}

	var findings []string
	branches := map[string]bool{}
	for _, step := range []string{stepLogs, stepMetrics, stepDeploys} {
		var dg Diagnosis
		if !d.check(h.output(step, &dg) == nil, "%s has no recorded output", step) {
			continue
		}
		if p, _, ok := h.stepStart(step); ok && p.Branch != "" {
			branches[p.Branch] = true
		}
		findings = append(findings, fmt.Sprintf("\n     %-8s → %s (%d%%)", dg.Source, dg.Finding, dg.Confidence))
	}
	how := "Diagnosis ran"
	if len(branches) == 3 {
		how = "Diagnosis ran as 3 parallel branches (steps diagnose#logs, #metrics, #deploys)"
	}
	d.say("%s:%s", how, strings.Join(findings, ""))

	var prop Proposal
	if d.check(h.output(stepPropose, &prop) == nil, "model.propose has no recorded output") {
		p, _, _ := h.stepStart(stepPropose)
		opts := make([]string, len(prop.Plans))
		for i, pl := range prop.Plans {
			opts[i] = fmt.Sprintf("%s (%s risk)", pl.Variant, pl.Risk)
		}
		d.say("The model proposed (step %s, kind %s, tool %s — scripted, offline): %q Options: %s.",
			stepPropose, p.Kind, p.ToolID, prop.Text, strings.Join(opts, ", "))
	}

	var choice Choice
	var nowMs int64
	de, err := h.decision(decisionRemediation, &choice)
	_, nerr := h.decision("__loom_now#0", &nowMs)
	if d.check(err == nil && nerr == nil, "the decision or the incident time is not recorded") {
		d.say("Recorded decision %q (#%d): %s — %s, because %s. Incident time, recorded by loom.Now: %s.",
			decisionRemediation, de.Sequence, choice.Plan.Variant, choice.Plan.Action, choice.Rule,
			time.UnixMilli(nowMs).UTC().Format(time.RFC3339))
	}
	if e, ok := h.first(emitProposed, 0); d.check(ok, "incident.proposed was not emitted") {
		d.say("Emitted %s (#%d) for whoever follows the log.", emitProposed, e.Sequence)
	}

	park, pe, ok := h.park()
	if !d.check(ok, "the log holds no park at the approval gate") {
		return 0, d.result()
	}
	st := fold.Fold(h.events)
	wait := ""
	if park.TimeoutMs != nil {
		wait = ", waiting up to " + hours(time.Duration(*park.TimeoutMs)*time.Millisecond)
	}
	d.check(st.Status == fold.StatusSuspended, "after the start process exited the execution is %s, not suspended", st.Status)
	d.say("Parked at the %s gate (#%d%s); process %d exited while the execution was %s.", park.On, pe.Sequence, wait, pid, st.Status)
	return pe.Sequence, nil
}

// tellResume narrates act 2, proving "served from the log" by which steps
// the log says were started after the resume.
func (d *demo) tellResume(h history, startPID, pid int) {
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
	verb := "approval"
	if !a.Approved {
		verb = "rejection"
	}
	if d.check(len(rerun) == 0 && len(decided) == 0, "steps or decisions recorded before the gate ran again after it: %v %v", rerun, decided) {
		d.say("New process %d resumed it with %s by %s (#%d). The %d steps completed before the park were served from the log, not re-run: "+
			"after #%d the log records no STEP_STARTED for them and no new decision; process %d started only %s.",
			pid, verb, a.By, re.Sequence, len(before), re.Sequence, pid, listOrNone(afterIDs))
	} else {
		d.say("New process %d resumed it with %s by %s (#%d) and re-ran %s.", pid, verb, a.By, re.Sequence, listOrNone(append(rerun, decided...)))
	}

	var fix FixResult
	var choice Choice
	if h.output(stepApply, &fix) == nil {
		_, se, _ := h.stepStart(stepApply)
		_, _ = h.decision(decisionRemediation, &choice)
		d.say("Applied the fix (step %s, non-idempotent, started at #%d): %s — change %s.", stepApply, se.Sequence, choice.Plan.Action, fix.Change)
	}
	var rec Recovery
	if h.output(stepVerify, &rec) == nil {
		d.say("Checked recovery (step %s): p99 %dms, %s errors — %s.", stepVerify, rec.P99Ms, permille(rec.ErrorPermille), map[bool]string{true: "recovered", false: "not recovered"}[rec.Recovered])
	}
	sum, ok := h.summary()
	end, _ := h.last(event.ExecutionCompleted)
	if d.check(ok, "the execution did not complete") {
		d.check(sum.Outcome == outcomeFixed, "the approved incident ended %s, not fixed", sum.Outcome)
		d.say("Completed (#%d): %s; process %d exited. %d events in the log.", end.Sequence, sum.Outcome, pid, len(h.events))
	}
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
	forkSteps := listOrNone(fork.startedIDs(fre.Sequence, 1<<62))
	if fork.simulated() {
		forkSteps += " (simulation)"
	}
	copied := fmt.Sprintf("%d", len(fork.events))
	if int64(len(fork.events)) > at+1 && fork.events[at+1].Type == loom.ForkMarker {
		copied += fmt.Sprintf(" (#0–#%d copied, #%d the fork marker)", at, at+1)
	}
	row("steps after the gate", listOrNone(original.startedIDs(ore.Sequence, 1<<62)), forkSteps)
	row("outcome", outcomeText(orig), outcomeText(fs))
	row("events", fmt.Sprint(len(original.events)), copied)
	row("re-fold", "byte-identical", "byte-identical ("+fv.digest[:19]+"…)")
	if err := tw.Flush(); err != nil {
		d.check(false, "printing the table: %v", err)
	}
}

func answerText(a Approval) string {
	if a.Approved {
		return "approved by " + a.By
	}
	return fmt.Sprintf("rejected by %s: %q", a.By, a.Reason)
}

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

// handHints tells the reader how to do each step by hand.
func (d *demo) handHints(id string) {
	db := " -db " + d.c.db
	w := d.c.stdout
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Do it by hand; each command is its own process (incident = go run ./examples/incident):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range [][2]string{
		{"incident start" + db, "prints the id; exits once parked at the gate"},
		{"incident status <id>" + db, "where it is"},
		{"incident approve <id> -by you" + db, "or: incident reject <id> -reason why"},
		{"incident verify <id>" + db, "re-fold the log and compare bytes"},
		{"incident fork <id>" + db, "branch at the gate, then answer the fork the other way"},
		{"incident log " + id + db, "every stored event of this run"},
	} {
		fmt.Fprintf(tw, "   %s\t# %s\n", l[0], l[1])
	}
	if err := tw.Flush(); err != nil {
		d.check(false, "printing the hints: %v", err)
	}
}

// hours renders a whole number of hours as "24h".
func hours(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// shellJoin renders args as a shell would need them typed.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
