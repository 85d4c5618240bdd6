package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
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

// child runs this binary with args (and the model flags) as a child
// process and returns its pid and what it printed once it has exited with
// status 0.
func (d *demo) child(args ...string) (int, string, error) {
	args = append(args, d.c.models.args()...)
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
		return pid, "", fmt.Errorf("the child process `%s` (pid %d) failed: %v\n%s%s", line, pid, err, out.String(), errOut.String())
	}
	fmt.Fprintf(d.c.stdout, "   $ %s   → process %d, exit status %d\n", line, pid, cmd.ProcessState.ExitCode())
	if d.verbose {
		for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
			fmt.Fprintf(d.c.stdout, "   │ %s\n", l)
		}
	}
	return pid, out.String(), nil
}

// cmdDemo tells the whole story (see demo), after refreshing the cassette
// with -record.
func cmdDemo(c *cli, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	verbose := fs.Bool("v", false, "also print what each child process printed")
	record := fs.Bool("record", false, "first refresh the cassette: record every scenario of record.go from the scripted model, or from -provider's live model, into -cassette (default: the committed one), then play the demo from it")
	approver := fs.String("by", "alice", "who approves the original")
	rejecter := fs.String("rejecter", "bob", "who rejects the fork")
	in := Incident{}
	fs.StringVar(&in.Service, "service", defaultService, "the affected `service` (the cassette holds checkout and search; other services need -provider)")
	fs.StringVar(&in.Symptom, "symptom", defaultSymptom, "what is wrong (mention memory for the OOM scenario)")
	if _, err := c.flags(fs, args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run it as a child process: %w", err)
	}
	if *record {
		if err := c.recordFirst(); err != nil {
			return err
		}
	}
	m, err := c.models.open()
	if err != nil {
		return err
	}
	if err := removeDB(c.db); err != nil {
		return err
	}
	d := &demo{c: c, exe: exe, verbose: *verbose}
	id := newID("inc-", 8)
	fmt.Fprintf(c.stdout, "Incident demo: flow %s on a fresh SQLite file, %s (this is process %d).\n", flowID, c.db, os.Getpid())
	fmt.Fprintf(c.stdout, "The planner's model: %s, %s.\n\n", m.toolID(), m.source)

	// Act 1: a child process starts the incident; it parks and the process exits.
	startPID, startOut, err := d.child("start", "-db", c.db, "-id", id, "-service", in.Service, "-symptom", in.Symptom)
	if err != nil {
		return err
	}
	parkSeq, err := d.tellStart(id, startPID)
	if err != nil {
		return err
	}

	// Act 2: another child process approves; the flow resumes there.
	fmt.Fprintln(c.stdout)
	approvePID, approveOut, err := d.child("approve", id, "-db", c.db, "-by", *approver)
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
	d.tellResume(original, startPID, approvePID, [2]int{lookupsIn(startOut), lookupsIn(approveOut)})

	// Act 3: re-fold the stored log from scratch, in this process.
	fmt.Fprintln(c.stdout)
	v, err := verifyExecution(c.ctx, s, id)
	if !d.check(err == nil, "%v", err) {
		return d.result()
	}
	fmt.Fprintf(c.stdout, "Verified: re-folding the %d stored events gives byte-identical state (%s); the runtime loaded it from %s.\n",
		v.events, v.digest, v.source())

	// Act 4: fork at the gate and answer the other way, simulated.
	fork, err := d.forkAndReject(s, id, parkSeq, agent.Answer{Decision: agent.DecisionReject, By: *rejecter, Reason: "change freeze during the sale"})
	if err != nil {
		return err
	}
	after, err := readHistory(c.ctx, s.stores.Events, id)
	if err != nil {
		return err
	}
	d.check(len(after.events) == len(original.events), "the fork changed the original's log (%d → %d events)", len(original.events), len(after.events))
	fv, err := verifyExecution(c.ctx, s, fork.id)
	d.check(err == nil, "the fork: %v", err)
	d.tellFork(original, fork, parkSeq, fv)
	d.handHints(id)
	return d.result()
}

// recordFirst refreshes the cassette (-record) and points the model flags
// at the new file, so the demo and its children replay what was recorded.
func (c *cli) recordFirst() error {
	path := c.models.cassette
	if path == "" {
		p, err := defaultCassettePath()
		if err != nil {
			return err
		}
		path = p
	}
	from, modelName, err := c.models.recorder()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Recording the planner's cassette %s from %s (model %s):\n", path, from.Name(), modelName)
	n, err := recordCassette(c.ctx, path, from, modelName, c.stdout)
	if err != nil {
		return fmt.Errorf("recording the cassette: %w", err)
	}
	fmt.Fprintf(c.stdout, "Recorded %d interactions into %s. The demo below replays that file; rebuild to embed it, and\n"+
		"regenerate the golden histories: go test ./examples/incident/ -run Golden -update-histories\n\n", n, path)
	c.models = modelFlags{cassette: path}
	return nil
}

// forkAndReject forks id at the park, simulated, and rejects the fork's
// pending call with no.
func (d *demo) forkAndReject(s *session, id string, at int64, no agent.Answer) (history, error) {
	c := d.c
	forkID := newID(id+"-fork-", 4)
	st, err := forkAt(c.ctx, s, id, at, forkID, true)
	if err != nil {
		return history{}, err
	}
	h, err := readHistory(c.ctx, s.stores.Events, forkID)
	if err != nil {
		return history{}, err
	}
	req, ok := h.pending(st)
	if !ok {
		return history{}, fmt.Errorf("the fork %s is %s, not waiting for an approval", forkID, st.Status)
	}
	if err := s.rt.Resume(c.ctx, forkID, loom.ResumeEvent{EventType: req.Gate, Payload: mustJSON(no)}); err != nil {
		return history{}, fmt.Errorf("resuming the fork: %w", err)
	}
	if _, err := s.rt.WaitForCompletion(c.ctx, forkID); err != nil {
		return history{}, fmt.Errorf("waiting for the fork: %w", err)
	}
	return readHistory(c.ctx, s.stores.Events, forkID)
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

// handHints tells the reader how to do each step by hand.
func (d *demo) handHints(id string) {
	db := " -db " + d.c.db
	w := d.c.stdout
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Do it by hand; each command is its own process (incident = go run ./examples/incident):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range [][2]string{
		{"incident start" + db, "prints the id; exits once parked at the approval gate"},
		{"incident status <id>" + db, "where it is, and the exact call waiting for approval"},
		{"incident approve <id> -by you" + db, "or: reject <id> -reason why, or approve <id> -variant scale-out"},
		{"incident verify <id>" + db, "re-fold the log and compare bytes"},
		{"incident fork <id>" + db, "branch at the gate, then answer the fork the other way"},
		{"incident log " + id + db, "every stored event of this run"},
		{"incident start -provider anthropic" + db, "the planner live (ANTHROPIC_API_KEY; or openai, gemini)"},
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
