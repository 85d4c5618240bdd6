package main

import (
	"errors"
	"os/exec"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/loom-kernel/loom/eval"
)

// evalCommand is `loom eval`: the eval package's command. compare needs
// no flows and runs here; run needs the app's flows, so with --with it
// runs the app's eval program (a binary whose main calls eval.Main) with
// the same arguments and passes its exit status through.
func (c *cli) evalCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "eval [--with <program>] run --suite FILE --out DIR [--baseline REPORT] | compare --baseline A --candidate B",
		Short: "Run an eval suite file and write report.json and report.md, or compare two reports",
		Long: `eval runs the suite file's cases on the app's flows, grades them (exact,
regex, JSON Schema, an LLM judge through a recorded step) and writes
DIR/report.json and DIR/report.md; with --baseline it compares the new report
with an earlier one under the suite's thresholds. Only the app holds its
flows: pass --with, the app's eval program (its main calls eval.Main), and
loom runs it with the arguments that follow. compare reads two report.json
files and needs no program.

Exit status: 0 ok, 1 a case failed, 2 usage or a bad suite file, 3 regression.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			if len(args) >= 2 && args[0] == "--with" {
				return c.runEvalProgram(args[1], args[2:])
			}
			if code := eval.RunMain(c.ctx, eval.App{}, args, c.stdout, c.stderr); code != 0 {
				return &exitError{code: code, msg: "eval exited " + strconv.Itoa(code) + " (see above)"}
			}
			return nil
		},
	}
}

// runEvalProgram runs the app's eval program with args and passes its
// exit status through.
func (c *cli) runEvalProgram(path string, args []string) error {
	cmd := exec.CommandContext(c.ctx, path, args...)
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return &exitError{code: exit.ExitCode(), msg: "the eval program exited " + strconv.Itoa(exit.ExitCode()) + " (see above)"}
	default:
		return usagef("--with %s: %v: pass the app's eval program (its main calls eval.Main)", path, err)
	}
}
