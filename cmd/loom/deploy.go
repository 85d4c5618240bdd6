package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store"
)

func (c *cli) deployCommand() *cobra.Command {
	deploy := &cobra.Command{
		Use:   "deploy",
		Short: "Check new flow code against the executions a store holds, before deploying it",
	}
	deploy.AddCommand(c.deployCheckCommand())
	return deploy
}

func (c *cli) deployCheckCommand() *cobra.Command {
	var (
		storeSpec, with string
		ended           int
		seed            uint64
		ids             []string
	)
	cmd := &cobra.Command{
		Use:   "check --store <store> --with <program> [-- <program args>]",
		Short: "Replay every in-flight execution against the code you are about to deploy",
		Long: `deploy check replays each in-flight execution of the store (and, with
--ended N, a seeded sample of N ended ones) against the candidate code: the
program given by --with, an executable built from that code whose main calls
replay.Main with the app's flows. loom opens the store read-only and hands
the program one log at a time; the program replays it in memory — recorded
outcomes served, nothing run, nothing written — and says whether the new code
reaches the point the log stands at:

  compatible         it serves the log and parks or ends where the log does
  diverged           it parts from the log at a sequence (another step id,
                     a skipped step, a step needed before the park, another
                     outcome), named with the code path
  parks-differently  it serves the log but parks on another gate, or ends
                     where the log is parked
  code-pin-mismatch  the log's code pin is not one the flow declares
  unknown-flow       no candidate flow has the log's flow id

It exits 3 if any execution is not compatible, listing each with its
sequence, what the log has there and what the new code does instead.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if with == "" {
				return usagef("--with is required: the check program built from the code to deploy (its main calls replay.Main)")
			}
			opts := replay.Options{Ended: ended, Seed: seed, Executions: ids}
			return c.withStore(storeSpec, func(s *openedStore) error { return c.deployCheck(s, with, args, opts) })
		},
	}
	storeFlag(cmd, &storeSpec)
	cmd.Flags().StringVar(&with, "with", "", "the check `program`: an executable whose main calls replay.Main with the flows to deploy")
	cmd.Flags().IntVar(&ended, "ended", 0, "also check a seeded sample of `n` ended executions (-1: all)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "the seed of the --ended sample")
	cmd.Flags().StringSliceVar(&ids, "id", nil, "check only these execution `ids` (repeatable)")
	return cmd
}

// checkProc is a running check program: requests in, reports out.
type checkProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr strings.Builder
	hello  replay.Hello
}

func (c *cli) startCheckProgram(path string, args []string) (*checkProc, error) {
	p := &checkProc{cmd: exec.CommandContext(c.ctx, path, args...)}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, usagef("--with %s: %v: pass an executable built from the code to deploy, whose main calls replay.Main", path, err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(make([]byte, 0, 64<<10), 16<<20)
	if err := p.read(&p.hello); err != nil || p.hello.Hello != replay.ProtocolVersion {
		p.stop()
		return nil, usagef("--with %s does not speak the check protocol (want a first line {\"hello\": %q}; %v%s): its main must call replay.Main",
			path, replay.ProtocolVersion, err, p.stderrTail())
	}
	return p, nil
}

// read decodes the program's next line into v.
func (p *checkProc) read(v any) error {
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(p.out.Bytes(), v)
}

// check sends one log and reads its report.
func (p *checkProc) check(log []event.Envelope) (loom.ReplayReport, error) {
	req := replay.Request{Events: make([]json.RawMessage, len(log))}
	for i, e := range log {
		b, err := event.Encode(e)
		if err != nil {
			return loom.ReplayReport{}, err
		}
		req.Events[i] = b
	}
	line, err := json.Marshal(req)
	if err != nil {
		return loom.ReplayReport{}, err
	}
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return loom.ReplayReport{}, fmt.Errorf("the check program stopped reading: %w%s", err, p.stderrTail())
	}
	var rep loom.ReplayReport
	if err := p.read(&rep); err != nil {
		return loom.ReplayReport{}, fmt.Errorf("the check program gave no report: %w%s", err, p.stderrTail())
	}
	return rep, nil
}

// stop closes the program's stdin and waits for it.
func (p *checkProc) stop() error {
	_ = p.in.Close()
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("the check program exited %d%s", exit.ExitCode(), p.stderrTail())
	}
	return err
}

func (p *checkProc) stderrTail() string {
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return ": " + s
}

func (c *cli) deployCheck(s *openedStore, with string, args []string, opts replay.Options) error {
	ids, err := replay.Select(c.ctx, s.Events, opts)
	if err != nil {
		return err
	}
	prog, err := c.startCheckProgram(with, args)
	if err != nil {
		return err
	}
	rep := replay.NewReport(prog.hello.Flows)
	pr := c.newProgress()
	for i, id := range ids {
		pr.update("deploy check: %d of %d executions", i+1, len(ids))
		log, err := store.Read(c.ctx, s.Events, id)
		if err != nil {
			_ = prog.stop()
			return fmt.Errorf("reading %s: %w", id, err)
		}
		if len(log) == 0 {
			_ = prog.stop()
			return notFoundf("no execution %q in %s", id, s.name)
		}
		x, err := prog.check(log)
		if err != nil {
			_ = prog.stop()
			return err
		}
		rep.Add(x)
	}
	pr.done()
	if err := prog.stop(); err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else if err := rep.WriteText(c.stdout); err != nil {
		return err
	}
	if !rep.OK() {
		return checkFailedf("%d of %d executions would not replay under the new code: keep the old code for them "+
			"(loom.Version / ctx.Patched), declare a code pin compatible, or move them with ResumeAs", rep.Incompatible, rep.Checked)
	}
	return nil
}
