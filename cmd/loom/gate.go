package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

func (c *cli) gateCommand() *cobra.Command {
	var (
		r         remote
		storePath string
	)
	cmd := &cobra.Command{
		Use:   "gate <id>",
		Short: "Show what an execution is parked on, its timeout, and the JSON Schema its answer must satisfy",
		Long: `gate asks the app at --addr (execution.gate) what the execution is parked on:
the gate, since which sequence, when it times out, the command that answers
it and the JSON Schema the answer's payload must satisfy — or, for a step
parked in doubt, the step and attempt to resolve; for a select, each wait.

With --store it reads the park from the store instead, without the app
(read-only): everything but the schema, which lives in the flow's code.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := event.ValidateID("execution id", a[0]); err != nil {
				return usagef("%v", err)
			}
			if cmd.Flags().Changed("store") {
				return c.withStore(storePath, func(s *openedStore) error { return c.gateFromStore(s, a[0]) })
			}
			g, err := remoteCall(c, &r, (*wire.Client).Gate, wire.GateParams{ExecutionID: a[0]})
			if err != nil {
				return err
			}
			return c.printGate(g, true)
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&storePath, "store", "", "read the park from this store (a SQLite `file` or a PostgreSQL DSN) instead of asking the app")
	return cmd
}

// gateFromStore answers loom gate --store: the park as the log has it.
func (c *cli) gateFromStore(s *openedStore, id string) error {
	st, err := c.stateAt(s, id, -1)
	if err != nil {
		return err
	}
	g := wire.GateResult{ExecutionID: id, Status: st.Status, Sequence: st.Sequence, Gate: wire.ParkedGate(st, nil)}
	if head, err := s.Events.ReadFrom(c.ctx, id, 0); err == nil && len(head) > 0 {
		g.FlowID = head[0].WorkflowID
	}
	return c.printGate(g, false)
}

// printGate shows a park for people, or as JSON.
func (c *cli) printGate(g wire.GateResult, fromApp bool) error {
	if c.json {
		return c.printJSON(g)
	}
	id := g.ExecutionID
	t := newTable(c.stdout, "Execution", fmt.Sprintf("%s (%s): %s at #%d", id, g.FlowID, g.Status, g.Sequence))
	p := g.Gate
	if p == nil {
		t.row("Gate", "none: it is not parked")
		return t.flush()
	}
	switch p.Kind {
	case wire.GateInDoubt:
		t.row("Gate", fmt.Sprintf("in doubt about step %s, since #%d", p.StepID+attemptText(p.Attempt), p.Since))
		t.row("Why", "a step with side effects started, and the process driving it stopped before its outcome was recorded")
		t.row("Answer", fmt.Sprintf("check whether the step acted, then: loom resolve %s --done OUTPUT (it did; OUTPUT is its output as JSON) or loom resolve %s --rerun (it did not)", id, id))
	case wire.GateSelect:
		t.row("Gate", fmt.Sprintf("a select of %d waits, since #%d: the first to answer wins", len(p.Waits), p.Since))
		for i, w := range p.Waits {
			t.row(fmt.Sprintf("Wait %d", i+1), describeWait(id, w))
		}
	case wire.GateSleep:
		t.row("Gate", fmt.Sprintf("asleep since #%d; its timer answers it", p.Since))
	case wire.GateDiverged:
		t.row("Gate", fmt.Sprintf("stopped since #%d: a replay diverged from the log", p.Since))
		t.row("Answer", fmt.Sprintf("once the flow's code is fixed: loom resume %s --event %s", id, p.On))
	case wire.GateKernel:
		t.row("Gate", fmt.Sprintf("%s (a kernel gate), since #%d; no caller answers it", p.On, p.Since))
	default:
		t.row("Gate", fmt.Sprintf("%s, since #%d", p.On, p.Since))
		t.row("Answer", fmt.Sprintf("loom resume %s --event %s --payload JSON", id, p.On))
	}
	if p.Kind != wire.GateSelect && p.Kind != wire.GateInDoubt {
		t.row("Times out", timeoutText(p.WakeAt, p.TimeoutMs))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var schemas []string
	if p.Kind == wire.GateNamed {
		schemas = append(schemas, schemaText(p.On, p.Schema, fromApp))
	}
	for _, w := range p.Waits {
		if w.Kind == "gate" {
			schemas = append(schemas, schemaText(w.On, w.Schema, fromApp))
		}
	}
	for _, s := range schemas {
		fmt.Fprintf(c.stdout, "\n%s\n", s)
	}
	return nil
}

// describeWait is one line about a select's wait.
func describeWait(id string, w wire.Wait) string {
	switch w.Kind {
	case "gate":
		return fmt.Sprintf("gate %s: loom resume %s --event %s --payload JSON", w.On, id, w.On)
	case "message":
		return "a message on topic " + w.Topic
	case "timer":
		if w.WakeAt != nil {
			return "a timer at " + stamp(*w.WakeAt) + until(*w.WakeAt)
		}
		return "a timer"
	}
	return w.Kind
}

// schemaText renders the schema a gate's answer must satisfy.
func schemaText(gate string, schema json.RawMessage, fromApp bool) string {
	switch {
	case len(schema) > 0:
		var b bytes.Buffer
		if json.Indent(&b, schema, "", "  ") != nil {
			b.Reset()
			b.Write(schema)
		}
		return fmt.Sprintf("The answer to %s must satisfy this JSON Schema:\n%s", gate, b.String())
	case fromApp:
		return fmt.Sprintf("The flow declares no schema for %s: any JSON answers it.", gate)
	}
	return fmt.Sprintf("The schema of %s lives in the flow's code, not in the store: ask the app with loom gate --addr HOST:PORT.", gate)
}

func timeoutText(wakeAt, timeoutMs *int64) string {
	if wakeAt == nil {
		return "never: it waits until answered"
	}
	s := stamp(*wakeAt) + until(*wakeAt)
	if timeoutMs != nil {
		s += ", " + (time.Duration(*timeoutMs) * time.Millisecond).String() + " after it parked"
	}
	return s
}

// until says how far ms is from now: " (in 3h2m0s)" or " (past)".
func until(ms int64) string {
	d := time.Until(time.UnixMilli(ms)).Round(time.Second)
	if d <= 0 {
		return " (past: it fires at the next timer poll)"
	}
	return " (in " + d.String() + ")"
}

func attemptText(a *int64) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(" attempt %d", *a)
}

// inDoubtAbout names the step attempt of an in-doubt park.
func inDoubtAbout(p *fold.Suspension) string {
	return strings.TrimSpace("step " + p.StepID + attemptText(p.Attempt) + " may or may not have acted")
}
