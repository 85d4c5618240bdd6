package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

// defaultAddr is where an app serving the wire ABI listens by convention.
const defaultAddr = "127.0.0.1:7070"

// remote holds the flags of the control commands.
type remote struct {
	addr, token string
	timeout     time.Duration
}

// flags adds --addr, --token and --timeout. The defaults of --addr and
// --token come from $LOOM_ADDR and $LOOM_TOKEN when the command runs
// (resolve), so help names the variables once and never shows a token.
func (r *remote) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.addr, "addr", "", "the app's wire ABI: `host:port` or a URL (default $LOOM_ADDR, else "+defaultAddr+")")
	cmd.Flags().StringVar(&r.token, "token", "", "the bearer `token` (default $LOOM_TOKEN, which keeps it off the command line)")
	cmd.Flags().DurationVar(&r.timeout, "timeout", 2*time.Minute, "give up on the app after this `duration`")
}

// resolve fills --addr and --token from the environment when not given.
func (r *remote) resolve() {
	if r.addr == "" {
		r.addr = os.Getenv("LOOM_ADDR")
	}
	if r.addr == "" {
		r.addr = defaultAddr
	}
	if r.token == "" {
		r.token = os.Getenv("LOOM_TOKEN")
	}
}

// call bounds one call to the app by --timeout.
func (r *remote) call(c *cli) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, max(r.timeout, time.Second))
}

// remoteDo runs call against the app at --addr within --timeout; a failure
// to reach the app is explained (reach).
func remoteDo[R any](c *cli, r *remote, call func(context.Context, *wire.Client) (R, error)) (R, error) {
	cl, err := r.client()
	if err != nil {
		var zero R
		return zero, err
	}
	ctx, cancel := r.call(c)
	defer cancel()
	res, err := call(ctx, cl)
	if err != nil {
		return res, r.reach(err)
	}
	return res, nil
}

// remoteCall calls one wire method of the app at --addr with p:
// remoteCall(c, &r, (*wire.Client).Cancel, wire.CancelParams{…}).
func remoteCall[P, R any](c *cli, r *remote, method func(*wire.Client, context.Context, P) (R, error), p P) (R, error) {
	return remoteDo(c, r, func(ctx context.Context, cl *wire.Client) (R, error) { return method(cl, ctx, p) })
}

func (r *remote) client() (*wire.Client, error) {
	r.resolve()
	c, err := wire.NewClient(r.addr, wire.WithToken(r.token))
	if err != nil {
		return nil, usagef("--addr: %v", err)
	}
	return c, nil
}

// reach explains a transport failure: nothing answered at --addr.
func (r *remote) reach(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	if errors.Is(err, wire.ErrInvalidUTF8) {
		return usagef("an argument or JSON flag is not valid UTF-8 (or its JSON holds a lone surrogate escape such as \\udc00): " +
			"pass ids, event types, reasons and JSON as UTF-8 text; nothing was sent")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the app at %s did not answer within --timeout %s; the call may still have taken effect: check with loom state or loom logs", r.addr, r.timeout)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return fmt.Errorf("no Loom wire ABI answered at %s (%v): start the app's server (for example: incident serve -addr %s -token …) or pass --addr", r.addr, err, r.addr)
	}
	return err
}

func (c *cli) handshakeCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "handshake",
		Short: "Ask a running app which wire ABI, kernel ABI and syscalls it speaks",
		Args:  c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := r.client()
			if err != nil {
				return err
			}
			ctx, cancel := r.call(c)
			defer cancel()
			h, err := cl.Handshake(ctx)
			if err != nil {
				return r.reach(err)
			}
			if c.json {
				return c.printJSON(h)
			}
			t := newTable(c.stdout, "Server", cl.Endpoint())
			t.row("Wire ABI", h.WireABIVersion)
			t.row("Kernel ABI", h.KernelABIVersion)
			t.row("Syscalls", fmt.Sprint(h.Syscalls))
			t.row("Event schema", h.EventSchemaVersion)
			t.row("Methods", fmt.Sprint(h.Methods))
			for _, f := range h.Flows {
				gates := "no gate declares a schema"
				if len(f.ResumeSchemas) > 0 {
					gates = "gates with a schema: " + strings.Join(slices.Sorted(maps.Keys(f.ResumeSchemas)), ", ")
				}
				t.row("Flow", f.ID+" ("+gates+"; loom gate <id> shows one's schema)")
			}
			if m, ok := checkWire(h.WireABIVersion); !ok {
				t.row("Warning", m.String()+": this loom may not understand it")
			}
			return t.flush()
		},
	}
	r.flags(cmd)
	return cmd
}

func (c *cli) startCommand() *cobra.Command {
	var (
		r         remote
		input, id string
		wait      bool
	)
	cmd := &cobra.Command{
		Use:   "start <flow>",
		Short: "Start an execution of a flow in a running app",
		Long: `start asks the app at --addr to start an execution of <flow> with --input
(JSON, default null) and, with --id, under that execution id (refused with
exit 5 if it is taken). By default it waits until the execution parks or
ends (within the server's call timeout); --wait=false returns once the start
is durable.`,
		Args: c.args("flow"),
		RunE: func(cmd *cobra.Command, a []string) error {
			raw, err := jsonFlag("--input", input, `'{"item": "tea", "qty": 2}'`)
			if err != nil {
				return err
			}
			var res wire.StartResult
			err = c.waitFor(wait, func() (err error) {
				res, err = remoteCall(c, &r, (*wire.Client).Start, wire.StartParams{FlowID: a[0], Input: raw, ExecutionID: id, Wait: wait})
				return err
			}, "start: waiting for the execution of %s to park or end (at most --timeout %s)", a[0], r.timeout)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "Started %s (flow %s).\n", res.ExecutionID, a[0])
			return c.printSettled(res.ExecutionID, res.State, wait)
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&input, "input", "", "the flow's input as `JSON` (default null)")
	cmd.Flags().StringVar(&id, "id", "", "start under this execution `id` (default: one the runtime mints)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the execution parks or ends")
	return cmd
}

func (c *cli) resumeCommand() *cobra.Command {
	var (
		r                           remote
		eventType, payload, credArg string
		wait                        bool
	)
	cmd := &cobra.Command{
		Use:   "resume <id> --event TYPE [--payload JSON]",
		Short: "Answer the gate an execution is parked on",
		Long: `resume sends a resume event to the execution through the app's ingress gate
(spec §5): --event must name the gate it is parked on, and --payload (JSON)
must satisfy the gate's resume schema, if the flow declares one. A refusal
records nothing and exits 5. --credentials goes to the app's resume
authenticator and is never recorded.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if eventType == "" {
				return usagef("--event is required: the gate the execution is parked on (loom gate %s shows it, with its schema)", a[0])
			}
			raw, err := jsonFlag("--payload", payload, `'{"approved": true}'`)
			if err != nil {
				return err
			}
			cred, err := jsonFlag("--credentials", credArg, `'{"user": "ann"}'`)
			if err != nil {
				return err
			}
			var res wire.ResumeResult
			err = c.waitFor(wait, func() (err error) {
				res, err = remoteCall(c, &r, (*wire.Client).Resume, wire.ResumeParams{ExecutionID: a[0], EventType: eventType, Payload: raw, Credentials: cred, Wait: wait})
				return err
			}, "resume: waiting for %s to park again or end (at most --timeout %s)", a[0], r.timeout)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "Resumed %s at gate %s.\n", a[0], eventType)
			return c.printSettled(a[0], res.State, wait)
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&eventType, "event", "", "the gate to answer (the resume's event `type`)")
	cmd.Flags().StringVar(&payload, "payload", "", "the answer as `JSON` (default null)")
	cmd.Flags().StringVar(&credArg, "credentials", "", "`JSON` for the app's resume authenticator (never recorded)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the execution parks again or ends")
	return cmd
}

func (c *cli) cancelCommand() *cobra.Command {
	var (
		r      remote
		reason string
	)
	cmd := &cobra.Command{
		Use:     "cancel <id>",
		Aliases: []string{"terminate"},
		Short:   "Cancel (terminate) an execution at once (EXECUTION_CANCELLED)",
		Long: `cancel ends the execution at once through the app at --addr, durably: it
records EXECUTION_CANCELLED with --reason, a running step's effect sees its
context cancelled, and no step starts after it. Loom's cancel is what other
engines call terminate — there is no gentler cancel the flow handles first
— so loom terminate is the same command. An execution that has already
ended is refused (exit 5) and nothing is recorded.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			res, err := remoteCall(c, &r, (*wire.Client).Cancel, wire.CancelParams{ExecutionID: a[0], Reason: reason})
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "Cancelled %s; the cancel is durable.\n", res.ExecutionID)
			return nil
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded on EXECUTION_CANCELLED")
	return cmd
}

func (c *cli) sendCommand() *cobra.Command {
	var (
		r              remote
		topic, payload string
	)
	cmd := &cobra.Command{
		Use:   "send <id> --topic TOPIC [--payload JSON]",
		Short: "Send a message to an execution's inbox",
		Long: `send appends --payload (JSON, default null) to the inbox topic --topic of
the execution, through the app at --addr, and returns once the message is
durable; a flow parked receiving on that topic is woken. A message to an
execution that continued as new goes to its chain's live head. One to an
execution that has ended is refused (exit 5) and nothing is sent. The app
needs Features.Inbox.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if topic == "" {
				return usagef("--topic is required: the inbox topic the flow receives on")
			}
			raw, err := jsonFlag("--payload", payload, `'{"sku": "mug"}'`)
			if err != nil {
				return err
			}
			res, err := remoteCall(c, &r, (*wire.Client).Send, wire.SendParams{ExecutionID: a[0], Topic: topic, Payload: raw})
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "Sent to %s on topic %s; the message is durable.\n", res.ExecutionID, topic)
			return nil
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&topic, "topic", "", "the inbox `topic`")
	cmd.Flags().StringVar(&payload, "payload", "", "the message as `JSON` (default null)")
	return cmd
}

func (c *cli) resumeAsCommand() *cobra.Command {
	var (
		r                                 remote
		flowID, input, eventType, payload string
		wait                              bool
	)
	cmd := &cobra.Command{
		Use:   "resume-as <id> [--flow FLOW] [--input JSON] [--event GATE --payload JSON]",
		Short: "Re-open an execution, onto another flow or with a new input",
		Long: `resume-as re-opens the execution through the app at --addr (Runtime.ResumeAs):
a crashed one is re-driven, an ended one is re-opened and driven again, and
a parked one is answered with --event and --payload under the target flow's
schema. --flow moves it onto another registered flow (fixed code); --input
(JSON) replaces its recorded input, recorded as EXECUTION_MIGRATED first.
A refusal records nothing and exits 5.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			in, err := jsonFlag("--input", input, `'{"item": "tea"}'`)
			if err != nil {
				return err
			}
			raw, err := jsonFlag("--payload", payload, `'{"approved": true}'`)
			if err != nil {
				return err
			}
			var res wire.ResumeAsResult
			err = c.waitFor(wait, func() (err error) {
				res, err = remoteCall(c, &r, (*wire.Client).ResumeAs, wire.ResumeAsParams{ExecutionID: a[0], FlowID: flowID, Input: in, EventType: eventType, Payload: raw, Wait: wait})
				return err
			}, "resume-as: waiting for %s to park or end (at most --timeout %s)", a[0], r.timeout)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			onto := ""
			if flowID != "" {
				onto = " onto flow " + flowID
			}
			fmt.Fprintf(c.stdout, "Re-opened %s%s.\n", a[0], onto)
			return c.printSettled(a[0], res.State, wait)
		},
	}
	r.flags(cmd)
	cmd.Flags().StringVar(&flowID, "flow", "", "move the execution onto this registered `flow`")
	cmd.Flags().StringVar(&input, "input", "", "replace the recorded input with this `JSON`")
	cmd.Flags().StringVar(&eventType, "event", "", "for a parked execution: the gate to answer")
	cmd.Flags().StringVar(&payload, "payload", "", "for a parked execution: the answer as `JSON`")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the execution parks again or ends")
	return cmd
}

func (c *cli) recoverCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Run one recovery pass in a running app",
		Long: `recover asks the app at --addr for one recovery pass (Runtime.Recover): every
execution a stopped process left running is re-driven from its log
(EXECUTION_RECOVERED; completed steps are served, not run again), a
continued execution's missing successor is started, and a parked execution
whose message or child's end arrived while no process listened is answered.
It prints how many executions it re-drove or started. Apps recover on
their own at start and every Recovery.Interval; this is for now.`,
		Args: c.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res wire.RecoverResult
			err := c.waitFor(true, func() (err error) {
				res, err = remoteDo(c, &r, func(ctx context.Context, cl *wire.Client) (wire.RecoverResult, error) { return cl.Recover(ctx) })
				return err
			}, "recover: waiting for the app's recovery pass (at most --timeout %s)", r.timeout)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			fmt.Fprintf(c.stdout, "Recovered %d execution(s).\n", res.Recovered)
			return nil
		},
	}
	r.flags(cmd)
	return cmd
}

func (c *cli) forkCommand() *cobra.Command {
	var (
		r              remote
		at             sequenceValue
		id             string
		simulate, wait bool
	)
	cmd := &cobra.Command{
		Use:   "fork <id> --at SEQ",
		Short: "Copy an execution's log up to a sequence into a new execution",
		Long: `fork copies the events [0..SEQ] of an execution into a new one (--id, or a
fresh id) that then runs on its own: the original is untouched and there is
no merge. --simulate makes every drive of the fork a simulation, in which
steps with side effects run their simulation.`,
		Args: c.args("id"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !at.set || at.n < 0 {
				return usagef("--at is required: the last sequence to copy, 0 or more (loom logs %s lists them)", a[0])
			}
			var res wire.ForkResult
			err := c.waitFor(wait, func() (err error) {
				res, err = remoteCall(c, &r, (*wire.Client).Fork, wire.ForkParams{ExecutionID: a[0], At: &at.n, ForkID: id, Simulate: simulate, Wait: wait})
				return err
			}, "fork: waiting for the fork of %s to park or end (at most --timeout %s)", a[0], r.timeout)
			if err != nil {
				return err
			}
			if c.json {
				return c.printJSON(res)
			}
			mode := ""
			if simulate {
				mode = " as a simulation"
			}
			fmt.Fprintf(c.stdout, "Forked %s at #%d into %s%s; the original is untouched.\n", a[0], at.n, res.ExecutionID, mode)
			return c.printSettled(res.ExecutionID, res.State, wait)
		},
	}
	r.flags(cmd)
	sequenceFlag(cmd, &at, "at", "the last `sequence` to copy (required)")
	cmd.Flags().StringVar(&id, "id", "", "the fork's execution `id` (default: a fresh one)")
	cmd.Flags().BoolVar(&simulate, "simulate", false, "drive the fork in simulate mode")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the fork parks or ends")
	return cmd
}

// waitFor runs call, showing on stderr what it waits for while it does
// when the call waits (a --wait flag).
func (c *cli) waitFor(waits bool, call func() error, format string, args ...any) error {
	if !waits {
		return call()
	}
	return c.wait(call, format, args...)
}

// jsonFlag validates a JSON flag; empty means absent.
func jsonFlag(name, value, example string) (json.RawMessage, error) {
	if value == "" {
		return nil, nil
	}
	if !json.Valid([]byte(value)) {
		return nil, usagef("%s is not JSON; quote it for the shell, for example %s %s", name, name, example)
	}
	return json.RawMessage(value), nil
}

// printSettled says where an execution stands after a waited call.
func (c *cli) printSettled(id string, state json.RawMessage, waited bool) error {
	if !waited {
		return nil
	}
	if len(state) == 0 {
		fmt.Fprintf(c.stdout, "%s is still running; follow it with: loom logs %s --follow --store <file>\n", id, id)
		return nil
	}
	st, err := fold.Decode(state)
	if err != nil {
		return err
	}
	switch st.Status {
	case fold.StatusSuspended:
		park := st.Variables.SuspendedOn
		switch {
		case park == nil:
			fmt.Fprintf(c.stdout, "%s is parked (#%d): loom gate %s shows on what.\n", id, st.Sequence, id)
		case park.On == fold.GateInDoubt:
			fmt.Fprintf(c.stdout, "%s is parked in doubt (#%d): %s. Check whether it acted, then: loom resolve %s --done OUTPUT (it did) or --rerun (it did not)\n",
				id, st.Sequence, inDoubtAbout(park), id)
		default:
			fmt.Fprintf(c.stdout, "%s is parked on gate %s (#%d). Answer with: loom resume %s --event %s --payload JSON (loom gate %s shows its schema)\n",
				id, park.On, st.Sequence, id, park.On, id)
		}
	case fold.StatusCompleted:
		fmt.Fprintf(c.stdout, "%s completed (#%d): %s\n", id, st.Sequence, short(st.Variables.Output, 200))
	case fold.StatusFailed:
		fmt.Fprintf(c.stdout, "%s failed (#%d): %s\n", id, st.Sequence, short(st.Variables.Error, 200))
	default:
		fmt.Fprintf(c.stdout, "%s is %s (#%d).\n", id, st.Status, st.Sequence)
	}
	return nil
}
