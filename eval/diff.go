package eval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// ChangeKind says how a value differs between two runs.
type ChangeKind string

// The change kinds: present only in the second run, only in the first, or
// in both with different values.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	Changed ChangeKind = "changed"
)

// Change is one difference between two runs: what (Key: a step id, a
// decision id, "gate 1", "output"…), which of its fields (Field, empty
// when the whole thing was added or removed), and the values in the first
// run (From) and the second (To), as canonical JSON.
type Change struct {
	Kind  ChangeKind      `json:"kind"`
	Key   string          `json:"key"`
	Field string          `json:"field,omitempty"`
	From  json.RawMessage `json:"from,omitempty"`
	To    json.RawMessage `json:"to,omitempty"`
}

// Diff is the structural difference between two executions, section by
// section, each in a stable order (steps and decisions by id, gates in the
// order they were reached). An empty Diff means the two runs did the same
// thing with the same results.
type Diff struct {
	// Execution: the final status, output and error.
	Execution []Change `json:"execution,omitempty"`
	// Steps: by step id, the status, output, error (or typed failure
	// channel) and attempts.
	Steps []Change `json:"steps,omitempty"`
	// Decisions: by decision id, the recorded choice. The kernel's own
	// decisions (loom.Now, loom.Random, their ids starting __loom_) are
	// compared by presence only: their values are clock readings and seeds,
	// which differ on every run.
	Decisions []Change `json:"decisions,omitempty"`
	// Gates: the gates reached, in order, and the answer each was given.
	Gates []Change `json:"gates,omitempty"`
	// Costs: model calls, tokens and cost in US dollars, from the
	// RESOURCE_METERED totals and the llm steps.
	Costs []Change `json:"costs,omitempty"`
}

// Empty reports whether the two runs did not differ.
func (d Diff) Empty() bool {
	return len(d.Execution)+len(d.Steps)+len(d.Decisions)+len(d.Gates)+len(d.Costs) == 0
}

// DiffRuns compares two executions' logs (a, then b): the first is the
// reference. It folds each log and compares what the runs did, never how
// the log spelled it: event ids, timestamps, sequences, execution ids and
// flow hashes are ignored, and JSON values are compared canonically. It
// reads nothing but its arguments.
func DiffRuns(a, b []event.Envelope) Diff {
	ra, rb := readLog(a), readLog(b)
	var d Diff
	d.Execution = diffExecution(ra.state, rb.state)
	d.Steps = diffSteps(ra.state.Frames, rb.state.Frames)
	d.Decisions = diffDecisions(ra.state.Variables.Decisions, rb.state.Variables.Decisions)
	d.Gates = diffGates(ra.gates, rb.gates)
	d.Costs = diffCosts(costsOf(ra.state), costsOf(rb.state))
	return d
}

func diffExecution(a, b fold.State) []Change {
	var out []Change
	out = appendField(out, "execution", "status", mustJSON(a.Status), mustJSON(b.Status))
	out = appendField(out, "execution", "output", a.Variables.Output, b.Variables.Output)
	out = appendField(out, "execution", "error", a.Variables.Error, b.Variables.Error)
	return out
}

// appendField appends a Changed entry when from and to differ; an absent
// value on one side makes it Added or Removed.
func appendField(out []Change, key, field string, from, to json.RawMessage) []Change {
	if sameJSON(from, to) {
		return out
	}
	c := Change{Kind: Changed, Key: key, Field: field, From: nullable(from), To: nullable(to)}
	switch {
	case len(from) == 0:
		c.Kind = Added
	case len(to) == 0:
		c.Kind = Removed
	}
	return append(out, c)
}

// nullable is raw canonical, or nothing for an absent value.
func nullable(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return canonical(raw)
}

// stepView is what a diff compares of a step frame.
func stepView(f fold.Frame) json.RawMessage {
	return mustJSON(struct {
		Status   fold.FrameStatus `json:"status"`
		Attempts int64            `json:"attempts"`
		Output   json.RawMessage  `json:"output,omitempty"`
		Error    json.RawMessage  `json:"error,omitempty"`
		Channel  string           `json:"channel,omitempty"`
	}{f.Status, f.Attempt, nullable(f.Output), nullable(f.Error), f.ErrorChannel})
}

func diffSteps(a, b map[string]fold.Frame) []Change {
	var out []Change
	for _, id := range unionKeys(a, b) {
		fa, inA := a[id]
		fb, inB := b[id]
		switch {
		case !inB:
			out = append(out, Change{Kind: Removed, Key: id, From: stepView(fa)})
		case !inA:
			out = append(out, Change{Kind: Added, Key: id, To: stepView(fb)})
		default:
			out = appendField(out, id, "status", mustJSON(fa.Status), mustJSON(fb.Status))
			out = appendField(out, id, "attempts", mustJSON(fa.Attempt), mustJSON(fb.Attempt))
			out = appendField(out, id, "output", fa.Output, fb.Output)
			out = appendField(out, id, "error", fa.Error, fb.Error)
			out = appendField(out, id, "channel", mustJSON(fa.ErrorChannel), mustJSON(fb.ErrorChannel))
		}
	}
	return out
}

// kernelDecision reports whether id is one of the kernel's own decisions.
func kernelDecision(id string) bool { return strings.HasPrefix(id, "__loom_") }

func diffDecisions(a, b map[string]fold.Decision) []Change {
	var out []Change
	for _, id := range unionKeys(a, b) {
		da, inA := a[id]
		db, inB := b[id]
		switch {
		case !inB:
			out = append(out, Change{Kind: Removed, Key: id, From: canonical(da.Choice)})
		case !inA:
			out = append(out, Change{Kind: Added, Key: id, To: canonical(db.Choice)})
		case !kernelDecision(id):
			out = appendField(out, id, "choice", da.Choice, db.Choice)
		}
	}
	return out
}

func diffGates(a, b []gateVisit) []Change {
	var out []Change
	for i := range max(len(a), len(b)) {
		key := "gate " + strconv.Itoa(i+1)
		switch {
		case i >= len(b):
			out = append(out, Change{Kind: Removed, Key: key, From: mustJSON(a[i])})
		case i >= len(a):
			out = append(out, Change{Kind: Added, Key: key, To: mustJSON(b[i])})
		default:
			out = appendField(out, key, "gate", mustJSON(a[i].Gate), mustJSON(b[i].Gate))
			out = appendField(out, key, "answer", answerOf(a[i]), answerOf(b[i]))
		}
	}
	return out
}

// answerOf is a visit's answer, absent while it is unanswered.
func answerOf(g gateVisit) json.RawMessage {
	if !g.Answered {
		return nil
	}
	return g.Answer
}

func diffCosts(a, b Costs) []Change {
	var out []Change
	out = appendField(out, "costs", "modelCalls", mustJSON(a.ModelCalls), mustJSON(b.ModelCalls))
	out = appendField(out, "costs", "tokens", mustJSON(a.Tokens), mustJSON(b.Tokens))
	out = appendField(out, "costs", "costUsd", mustJSON(a.CostUSD), mustJSON(b.CostUSD))
	return out
}

// unionKeys is the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a { //loom:sorted below
		keys = append(keys, k)
	}
	for k := range b { //loom:sorted below
		if _, dup := a[k]; !dup {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// String renders the diff for people: one line per change, grouped by
// section, or "no differences".
func (d Diff) String() string {
	if d.Empty() {
		return "no differences\n"
	}
	var b strings.Builder
	for _, sec := range []struct {
		name    string
		changes []Change
	}{{"execution", d.Execution}, {"steps", d.Steps}, {"decisions", d.Decisions}, {"gates", d.Gates}, {"costs", d.Costs}} {
		if len(sec.changes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", sec.name)
		for _, c := range sec.changes {
			b.WriteString("  " + c.String() + "\n")
		}
	}
	return b.String()
}

// String renders one change: "+ key", "- key" or "~ key.field: from -> to".
func (c Change) String() string {
	name := c.Key
	if c.Field != "" {
		name += "." + c.Field
	}
	const width = 120
	switch c.Kind {
	case Added:
		return fmt.Sprintf("+ %s: %s", name, clip(string(c.To), width))
	case Removed:
		return fmt.Sprintf("- %s: %s", name, clip(string(c.From), width))
	}
	return fmt.Sprintf("~ %s: %s -> %s", name, clip(string(c.From), width), clip(string(c.To), width))
}
