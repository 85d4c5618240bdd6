package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// defaultDB is the SQLite file every command uses without -db.
const defaultDB = "incident.db"

// main runs the command line and exits with its status.
func main() {
	if code := run(os.Args[1:], os.Stdout, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// command is one subcommand: its synopsis and what it does.
type command struct {
	name, args, help string
	run              func(c *cli, args []string) error
}

// commands are the subcommands, in the order help lists them.
var commands = []command{
	{"demo", "[-db FILE] [-v] [-record]", "run the whole story: start, process exit, approve in a new process, verify, fork (-record first refreshes the cassette)", cmdDemo},
	{"start", "[-db FILE] [-id ID] [-service S] [-symptom TEXT] [-q]", "start an incident; prints its id and exits once the planner parks for approval", cmdStart},
	{"status", "<id> [-db FILE]", "show where an incident is, and the call waiting for approval", cmdStatus},
	{"approve", "<id> [-db FILE] [-by NAME] [-reason TEXT] [-variant V] [-digest D]", "approve the pending apply_fix call (-variant: with another plan) and run it to the end", cmdApprove},
	{"reject", "<id> [-db FILE] [-by NAME] [-reason TEXT] [-digest D]", "reject the pending call: the model is told, and the flow escalates", cmdReject},
	{"answer", "<id> <json> [-db FILE] [-digest D]", "send a raw JSON answer (agent.Answer) to the pending approval gate", cmdAnswer},
	{"resolve", "<id> (-done JSON | -rerun) [-db FILE]", "resolve an incident parked in doubt: the step acted (-done, with its output) or must run again (-rerun)", cmdResolve},
	{"verify", "<id> [-db FILE]", "re-fold the stored log and compare it byte for byte with the runtime's state", cmdVerify},
	{"fork", "<id> [-db FILE] [-at SEQ] [-id ID] [-simulate=false]", "copy the log up to SEQ (default: the approval gate) into a new execution", cmdFork},
	{"log", "<id> [-db FILE]", "print one line per stored event", cmdLog},
	{"serve", "[-db FILE] [-addr HOST:PORT] [-token T] [-as NAME]", "serve the Loom wire ABI (JSON-RPC over HTTP, bearer token) until interrupted", cmdServe},
}

// cli is one invocation: where it writes, which database it uses and
// which model plans.
type cli struct {
	stdout, stderr io.Writer
	db             string
	models         modelFlags
	ctx            context.Context
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

// Error implements error.
func (e *usageError) Error() string { return e.msg }

// usagef builds a usage error.
func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := &cli{stdout: stdout, stderr: stderr, db: defaultDB, ctx: ctx}
	global := flag.NewFlagSet("incident", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.StringVar(&c.db, "db", defaultDB, "SQLite `file` holding the executions")
	c.models.register(global)
	if err := global.Parse(args); err != nil || global.NArg() == 0 {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		printUsage(stderr)
		return 2
	}
	name, rest := global.Arg(0), global.Args()[1:]
	for _, cmd := range commands {
		if cmd.name == name {
			return c.exit(cmd, cmd.run(c, rest))
		}
	}
	if name == "help" {
		printUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "incident: unknown command %q\n\n", name)
	printUsage(stderr)
	return 2
}

// exit reports err and maps it to an exit status.
func (c *cli) exit(cmd command, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "incident %s: %v\nusage: incident %s %s\n", cmd.name, ue, cmd.name, cmd.args)
		return 2
	default:
		fmt.Fprintf(c.stderr, "incident %s: %v\n", cmd.name, err)
		return 1
	}
}

// printUsage prints the command summary to w.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "incident — an incident-remediation agent on Loom, with a human approval gate on its fix")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: incident <command> [arguments]")
	fmt.Fprintln(w)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n           %s\n", cmd.name, cmd.args, cmd.help)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Every command works on the SQLite file given by -db (default %s).\n", defaultDB)
	fmt.Fprintln(w, "The planner's model: by default the committed cassette, replayed offline; -provider scripted")
	fmt.Fprintln(w, "plans any incident offline; -provider anthropic|openai|gemini [-model M] runs it live with")
	fmt.Fprintln(w, "ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY. Every command takes these flags.")
	fmt.Fprintln(w, "Start with:  incident demo")
}

// flags parses a subcommand's flags, which may come before or after its
// positional arguments, and returns the positionals. -db and the model
// flags (-provider, -model, -cassette) are always accepted.
func (c *cli) flags(fs *flag.FlagSet, args []string, positionals ...string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.db, "db", c.db, "SQLite `file` holding the executions")
	c.models.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(c.stdout, "usage: incident %s\n", fs.Name())
				fs.SetOutput(c.stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != len(positionals) {
		if len(positionals) == 0 {
			return nil, usagef("unexpected argument %q", pos[0])
		}
		return nil, usagef("want %s, got %d argument(s)", strings.Join(positionals, " "), len(pos))
	}
	return pos, nil
}

// session is an open database, the planner's model, this process's
// runbook MCP server and a runtime over them.
type session struct {
	stores   sqlite.Stores
	rt       *loom.Runtime
	fx       *effectCounter
	model    model
	runbooks *runbooks
}

// open opens the database and a runtime over it. Unless create is set the
// file must exist, so a mistyped -db is reported rather than created.
func (c *cli) open(create bool) (*session, error) { return c.openWith(create, nil) }

// openWith is open with a last word on the runtime's configuration (serve
// adds a resume authenticator).
func (c *cli) openWith(create bool, tweak func(*loom.Config)) (*session, error) {
	if !create {
		if _, err := os.Stat(c.db); err != nil {
			return nil, fmt.Errorf("no database at %s: start an incident first (incident start -db %s), or pass the right -db", c.db, c.db)
		}
	}
	m, err := c.models.open()
	if err != nil {
		return nil, err
	}
	rb, err := startRunbooks(c.ctx)
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: c.db})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("opening %s: %w", c.db, err), rb.close())
	}
	fx := newEffectCounter()
	cfg := loom.Config{
		Events:     st.Events,
		Snapshots:  st.Snapshots,
		Branches:   st.Branches,
		Timers:     st.Timers, // the approval gate's 24h timeout survives restarts
		Leases:     st.Leases,
		Durability: loom.StepDurable,
		Logger:     slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// A one-shot command (status, approve…) must not re-drive a crashed
		// incident behind the operator's back: only serve recovers.
		Recovery: loom.Recovery{Disabled: true},
	}
	if err := rb.wire(&cfg, fx, m); err != nil {
		return nil, errors.Join(err, st.Close(), rb.close())
	}
	if tweak != nil {
		tweak(&cfg)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		return nil, errors.Join(err, st.Close(), rb.close())
	}
	return &session{stores: st, rt: rt, fx: fx, model: m, runbooks: rb}, nil
}

// openExecution opens the database and loads execution id's state; on an
// error nothing is left open.
func (c *cli) openExecution(id string) (*session, fold.State, error) {
	s, err := c.open(false)
	if err != nil {
		return nil, fold.State{}, err
	}
	st, err := s.rt.LoadState(c.ctx, id)
	if errors.Is(err, loom.ErrExecutionNotFound) {
		err = notFound(id)
	}
	if err != nil {
		return nil, fold.State{}, errors.Join(err, s.close())
	}
	return s, st, nil
}

// close stops the runtime (waiting for its drives, so a park's snapshot is
// written), then the runbook server, then closes the database, waiting for
// queued writes.
func (s *session) close() error {
	return errors.Join(s.rt.Close(), s.runbooks.close(), s.stores.Close())
}

// closeInto closes s and joins a close failure into *err: in a durability
// demo a failed close is a lost write, never ignored.
func (s *session) closeInto(err *error) {
	*err = errors.Join(*err, s.close())
}

// lookupsLine starts the line on which a process reports the lookups its
// runbook server answered; the demo reads it back from a child's output.
const lookupsLine = "Runbook lookups this process's MCP server answered: "

// reportLookups prints the lookups this process's runbook server answered.
func (s *session) reportLookups(w io.Writer) {
	fmt.Fprintf(w, "%s%d (tool %s).\n", lookupsLine, s.runbooks.answered(), runbookToolID)
}

// lookupsIn reads the count reportLookups printed into out; -1 when out
// holds none.
func lookupsIn(out string) int {
	for _, l := range strings.Split(out, "\n") {
		var n int
		if rest, ok := strings.CutPrefix(l, lookupsLine); ok {
			if _, err := fmt.Sscanf(rest, "%d", &n); err == nil {
				return n
			}
		}
	}
	return -1
}

// notFound is the error for an id the database does not hold.
func notFound(id string) error {
	return fmt.Errorf("no execution %q in this database: check the id, or pass the -db file it was started in", id)
}
