package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// Defaults of start.
const (
	defaultService = "checkout"
	defaultSymptom = "p99 latency above 2s"
)

// cmdStart starts an incident and waits, in this process, until it parks.
func cmdStart(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	id := fs.String("id", "", "execution `id` (default: inc- and 8 random hex digits)")
	in := Incident{}
	fs.StringVar(&in.Service, "service", defaultService, "the affected `service`")
	fs.StringVar(&in.Symptom, "symptom", defaultSymptom, "what is wrong, in a few words (mention memory for the OOM scenario)")
	quiet := fs.Bool("q", false, "print only the execution id (for scripts: id=$(incident start -q))")
	if _, err := c.flags(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(in.Service) == "" || strings.TrimSpace(in.Symptom) == "" {
		return usagef("-service and -symptom must not be empty")
	}
	if *id == "" {
		*id = newID("inc-", 8)
	}
	s, err := c.open(true)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	if _, err := s.rt.Start(c.ctx, flowID, in, loom.WithExecutionID(*id)); err != nil {
		if errors.Is(err, loom.ErrExecutionExists) {
			return fmt.Errorf("an execution %q already exists in %s: pick another -id, or leave -id out", *id, c.db)
		}
		return err
	}
	st, err := s.rt.WaitForSuspend(c.ctx, *id)
	if *quiet && err == nil {
		fmt.Fprintln(c.stdout, *id)
		return nil
	}
	fmt.Fprintf(c.stdout, "Started incident %s for %s: %s (process %d).\n", *id, in.Service, in.Symptom, os.Getpid())
	if err != nil {
		var te *loom.ExecutionTerminatedError
		if errors.As(err, &te) {
			if te.Status == fold.StatusCompleted {
				h, herr := readHistory(c.ctx, s.stores.Events, *id)
				if sum, ok := h.summary(); herr == nil && ok {
					fmt.Fprintf(c.stdout, "Completed without asking for approval: %s.\n", describeOutcome(sum))
					return nil
				}
			}
			return fmt.Errorf("%s ended %s before reaching an approval gate: %s; see incident log %s%s",
				*id, te.Status, failureText(te.State.Variables.Error), *id, c.dbFlag())
		}
		return err
	}
	fmt.Fprintf(c.stdout, "Planner: %s, %s.\n", s.model.toolID(), s.model.source)
	fmt.Fprintf(c.stdout, "Ran in this process: %s.\n", describeSteps(s.fx.invoked()))
	fmt.Fprintf(c.stdout, "Model calls this process made: %d.\n", s.fx.modelCalls())
	s.reportLookups(c.stdout)
	h, err := readHistory(c.ctx, s.stores.Events, *id)
	if err != nil {
		return err
	}
	req, ok := h.pending(st)
	if !ok {
		return fmt.Errorf("%s parked on %q, not on an approval gate: see incident status %s%s", *id, st.Variables.SuspendedOn.On, *id, c.dbFlag())
	}
	fmt.Fprintf(c.stdout, "The planner asks to run: %s.\n", describeCall(h, req))
	fmt.Fprintf(c.stdout, "Parked at its approval gate %s (event #%d); it waits up to %s. This process exits now.\n",
		shortGate(req.Gate), st.Sequence, hours(approvalTimeout))
	fmt.Fprintf(c.stdout, "Next: incident approve %s -by <name>%s   or   incident reject %s -reason <text>%s\n", *id, c.dbFlag(), *id, c.dbFlag())
	return nil
}

// cmdStatus shows where an incident is, from its folded state and its log.
func cmdStatus(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	id := pos[0]
	s, st, err := c.openExecution(id)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	h, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	in, _ := h.input()
	fmt.Fprintf(c.stdout, "%s — %s for %s: %s\n", id, h.events[0].WorkflowID, in.Service, in.Symptom)
	if chain := parentOf(st); chain != "" {
		fmt.Fprintf(c.stdout, "Forked from %s\n", chain)
	}
	fmt.Fprintf(c.stdout, "Status: %s\n", describeStatus(st, h))
	if m := h.modelToolID(); m != "" {
		fmt.Fprintf(c.stdout, "Planner: agent %q on %s\n", plannerID, m)
	}
	req, pending := h.pending(st)
	if pending {
		fmt.Fprintf(c.stdout, "Waiting for approval: %s\n", describeCall(h, req))
	}
	fmt.Fprintf(c.stdout, "Steps: %s\n", describeFrames(st))
	fmt.Fprintf(c.stdout, "Events: %d (last #%d)\n", len(h.events), st.Sequence)
	switch park := st.Variables.SuspendedOn; {
	case st.Status == fold.StatusSuspended && park != nil && park.On == fold.GateInDoubt:
		fmt.Fprintf(c.stdout, "Next: check whether %s acted (%s), then record what you found:\n"+
			"  incident resolve %s -done '<its output as JSON>'%s   if it did\n"+
			"  incident resolve %s -rerun%s                        if it did not (it runs again)\n"+
			"  (while incident serve runs: loom resolve %s --done OUTPUT | --rerun)\n",
			park.StepID, stepWorld(h, park.StepID), id, c.dbFlag(), id, c.dbFlag(), id)
	case pending:
		fmt.Fprintf(c.stdout, "Next: incident approve %s -by <name>%s   or   incident reject %s -reason <text>%s\n"+
			"  (approve -variant scale-out approves another plan; -digest %s answers only this exact call)\n",
			id, c.dbFlag(), id, c.dbFlag(), req.Digest)
	case st.Status == fold.StatusRunning:
		fmt.Fprintf(c.stdout, "Next: nothing to do: a running process drives it, or, if the process that drove it stopped, "+
			"the next incident command recovers it (incident status %s%s again shows where it got to)\n", id, c.dbFlag())
	}
	return nil
}

// stepWorld says where to look to tell whether a step acted.
func stepWorld(h history, step string) string {
	switch {
	case h.toolOf(step) == toolApply:
		return "was the fix deployed? look at the service's change log"
	case step == stepEscalate:
		return "was the on-call team paged? look at the ticket queue"
	}
	return "look at what it acts on"
}

// describeStatus is one line about the execution's status.
func describeStatus(st fold.State, h history) string {
	switch st.Status {
	case fold.StatusSuspended:
		park := st.Variables.SuspendedOn
		if park.On == fold.GateInDoubt {
			attempt := ""
			if park.Attempt != nil {
				attempt = fmt.Sprintf(" attempt %d", *park.Attempt)
			}
			return fmt.Sprintf("parked in doubt: step %s%s started, and the process running it stopped before its outcome "+
				"was recorded, so nobody knows whether it acted; it waits for your verdict", park.StepID, attempt)
		}
		s := fmt.Sprintf("suspended at the %s gate, waiting for an answer", park.On)
		if isApprovalGate(park.On) {
			s = fmt.Sprintf("suspended at approval gate %s, waiting for an answer", shortGate(park.On))
		}
		if park.WakeAt != nil {
			s += fmt.Sprintf(" (deadline recorded as wakeAt: %s)", time.UnixMilli(*park.WakeAt).UTC().Format(time.RFC3339))
		}
		return s
	case fold.StatusCompleted:
		if sum, ok := h.summary(); ok {
			return "completed — " + describeOutcome(sum)
		}
	case fold.StatusFailed:
		return "failed: " + failureText(st.Variables.Error)
	}
	return string(st.Status)
}

// describeFrames lists the steps in the order they started, with status.
func describeFrames(st fold.State) string {
	frames := make([]fold.Frame, 0, len(st.Frames))
	for _, f := range st.Frames { //loom:sorted sorted just below
		frames = append(frames, f)
	}
	slices.SortFunc(frames, func(a, b fold.Frame) int { return int(a.Seq - b.Seq) })
	parts := make([]string, len(frames))
	for i, f := range frames {
		parts[i] = f.StepID + " " + string(f.Status)
	}
	return listOrNone(parts)
}

// describeOutcome is one line about how the flow ended.
func describeOutcome(sum Summary) string {
	by := ""
	if sum.DecidedBy != "" {
		by = " by " + sum.DecidedBy
	}
	switch sum.Outcome {
	case outcomeFixed, outcomeNotRecovered:
		verb := "approved"
		if sum.Planner.Decision == "edit" {
			verb = "approved with an edit"
		}
		s := fmt.Sprintf("%s: %s%s; %s (change %s)", sum.Outcome, verb, by, sum.Fix.Detail, sum.Fix.Change)
		if sum.Recovery != nil {
			s += fmt.Sprintf("; p99 now %dms, %s errors", sum.Recovery.P99Ms, permille(sum.Recovery.ErrorPermille))
		}
		return s + simulatedNote(sum.Simulated)
	case outcomeEscalated:
		what := "rejected" + by
		if sum.Planner.Decision == "" {
			what = "no fix applied"
		}
		page := "paged"
		if sum.Escalation.Simulated {
			page = "would page"
		}
		return fmt.Sprintf("escalated: %s (%s); %s %s, ticket %s", what, sum.Reason, page, sum.Escalation.Team, sum.Escalation.Ticket) +
			simulatedNote(sum.Simulated)
	}
	return sum.Outcome
}

// failureText is a recorded failure's message ({"message": …}), else the
// raw failure.
func failureText(raw json.RawMessage) string {
	var f struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &f) == nil && f.Message != "" {
		return f.Message
	}
	return string(raw)
}

// simulatedNote marks an outcome reached in simulation.
func simulatedNote(simulated bool) string {
	if simulated {
		return " [simulated: nothing acted for real]"
	}
	return ""
}

// parentOf describes the fork lineage recorded in the state, if any.
func parentOf(st fold.State) string {
	var chain []struct {
		ExecutionID string `json:"executionId"`
		Sequence    int64  `json:"sequence"`
		Simulate    bool   `json:"simulate"`
	}
	if len(st.Variables.ForkChain) == 0 || json.Unmarshal(st.Variables.ForkChain, &chain) != nil || len(chain) == 0 {
		return ""
	}
	l := chain[len(chain)-1]
	s := fmt.Sprintf("%s at #%d", l.ExecutionID, l.Sequence)
	if l.Simulate {
		s += " (simulated)"
	}
	return s
}

// cmdLog prints one line per stored event.
func cmdLog(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("log", flag.ContinueOnError)
	pos, err := c.flags(fs, args, "<id>")
	if err != nil {
		return err
	}
	s, err := c.open(false)
	if err != nil {
		return err
	}
	defer s.closeInto(&err)
	h, err := readHistory(c.ctx, s.stores.Events, pos[0])
	if err != nil {
		return err
	}
	for _, e := range h.events {
		fmt.Fprintf(c.stdout, "#%-3d %-20s %s%s\n", e.Sequence, e.Type, short(e.Payload, 100), marks(e))
	}
	return nil
}

// short renders a payload on one line, cut to at most n runes.
func short(raw json.RawMessage, n int) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// marks lists the metadata flags of an event, e.g. " [simulate]".
func marks(e event.Envelope) string {
	var m []string
	for _, k := range []string{"kernel", "simulate"} {
		if string(e.Metadata[k]) == "true" {
			m = append(m, k)
		}
	}
	if _, ok := e.FlowEmit(); ok {
		m = append(m, "flowEmit")
	}
	if len(m) == 0 {
		return ""
	}
	return " [" + strings.Join(m, ", ") + "]"
}

// dbFlag is the -db argument to repeat in a suggested command.
func (c *cli) dbFlag() string {
	if c.db == defaultDB {
		return ""
	}
	return " -db " + c.db
}

// newID returns prefix followed by n (even) random hex digits.
func newID(prefix string, n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the program instead
	return prefix + hex.EncodeToString(b)
}

// listOrNone joins items with commas, or says none.
func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
