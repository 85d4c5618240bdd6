package eval

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/llm"
)

// The exit statuses of RunMain and Main.
const (
	// ExitOK: every case passed, and no regression against the baseline.
	ExitOK = 0
	// ExitFailed: a case did not pass (or the run could not finish, or a
	// report could not be written).
	ExitFailed = 1
	// ExitUsage: bad arguments, or a suite file that does not parse or
	// validate (the message names the member and what to do).
	ExitUsage = 2
	// ExitRegressed: the candidate regressed against --baseline beyond the
	// suite's thresholds. It wins over ExitFailed.
	ExitRegressed = 3
)

// App is what only the application can give the eval command: its flows
// (and the rest of its composition root, Config) and the model providers
// its suite files' judges may name.
type App struct {
	// Config is the base configuration each suite run builds its runtime
	// from (effects, middleware, ...). Leave its stores unset: each run is
	// then on fresh memory stores, as eval.Run explains.
	Config loom.Config
	// Flows are added to Config.Flows.
	Flows []*loom.Flow
	// Providers are the judges' providers by name ("provider" in a suite
	// file).
	Providers map[string]llm.Provider
}

// Main runs the eval command on os.Args[1:] and exits with its status
// (see RunMain); SIGINT cancels the run. Call it from a binary of the app
// dedicated to evals, or from the app's main when its first argument is
// "eval" (then pass os.Args[2:] to RunMain yourself).
func Main(app App) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := RunMain(ctx, app, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  eval run --suite FILE --out DIR [--baseline REPORT]
      run the suite file's cases on the app's flows, grade them, write
      DIR/report.json and DIR/report.md (and DIR/comparison.json with
      --baseline, a report.json of an earlier run, compared under the
      suite's thresholds)
  eval compare --baseline REPORT --candidate REPORT [--pass-rate-drop X]
      [--mean-score-drop X] [--score-drop X] [--cost-increase X]
      compare two report.json files and print the regressions

exit status: 0 ok, 1 a case failed, 2 usage or bad suite file, 3 regression
`

// usageError is a bad invocation or suite file: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// RunMain is the eval command, testable: args are the arguments after the
// command's name ("run", "--suite", …), the report summary goes to stdout
// and errors to stderr. It returns the exit status (ExitOK, ExitFailed,
// ExitUsage or ExitRegressed) and never exits the process.
func RunMain(ctx context.Context, app App, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	var (
		code int
		err  error
	)
	switch args[0] {
	case "run":
		code, err = cmdRun(ctx, app, args[1:], stdout, stderr)
	case "compare":
		code, err = cmdCompare(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	default:
		err = &usageError{fmt.Sprintf("unknown command %q: use run or compare", args[0])}
	}
	if err == nil {
		return code
	}
	fmt.Fprintf(stderr, "eval %s: %s\n", args[0], err)
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, ErrBadSuiteFile) || errors.Is(err, ErrInvalidSuite) {
		fmt.Fprint(stderr, "run 'eval help' for usage\n")
		return ExitUsage
	}
	return ExitFailed
}

// flags parses a subcommand's flags; flag's own messages go to stderr.
func flags(name string, args []string, stderr io.Writer, define func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet("eval "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected argument %q: every input is a flag", fs.Arg(0))}
	}
	return nil
}

func cmdRun(ctx context.Context, app App, args []string, stdout, stderr io.Writer) (int, error) {
	var suitePath, out, baselinePath string
	err := flags("run", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&suitePath, "suite", "", "the suite `file` (JSON, format "+SuiteFormat+")")
		fs.StringVar(&out, "out", "", "the `directory` to write report.json and report.md into")
		fs.StringVar(&baselinePath, "baseline", "", "a report.json `file` of an earlier run to compare with")
	})
	switch {
	case err != nil:
		return 0, err
	case suitePath == "":
		return 0, &usageError{"--suite is required: the suite file to run"}
	case out == "":
		return 0, &usageError{"--out is required: the directory to write the reports into"}
	}
	s, err := ReadSuiteFile(suitePath, SuiteFileOptions{Providers: app.Providers})
	if err != nil {
		return 0, err
	}
	var baseline *Report
	if baselinePath != "" {
		b, err := ReadReport(baselinePath)
		if err != nil {
			return 0, &usageError{err.Error() + " (--baseline takes a report.json an earlier run wrote)"}
		}
		baseline = &b
	}
	cfg := app.Config
	cfg.Flows = append(append([]*loom.Flow(nil), cfg.Flows...), app.Flows...)
	if !slices.ContainsFunc(cfg.Flows, func(f *loom.Flow) bool { return f != nil && f.ID == s.Flow }) {
		return 0, &usageError{fmt.Sprintf("suite %s runs flow %q, which this binary does not register: run it from the app's own binary (eval.Main with its flows)", s.Name, s.Flow)}
	}
	rep, err := Run(ctx, cfg, s)
	if err != nil {
		return 0, err
	}
	var cmp *Comparison
	if baseline != nil {
		c := Compare(*baseline, rep, s.Thresholds)
		cmp = &c
	}
	written, err := WriteReport(out, rep, cmp)
	if err != nil {
		return 0, err
	}
	printRun(stdout, rep, cmp, written)
	switch {
	case cmp != nil && cmp.Regressed():
		return ExitRegressed, nil
	case !rep.Passed:
		return ExitFailed, nil
	}
	return ExitOK, nil
}

// printRun is the run's summary on stdout.
func printRun(w io.Writer, rep Report, cmp *Comparison, written []string) {
	passed := 0
	for _, c := range rep.Cases {
		if c.Passed {
			passed++
		}
	}
	fmt.Fprintf(w, "suite %s: %d/%d cases passed\n", rep.Suite, passed, len(rep.Cases))
	for _, c := range rep.Cases {
		if !c.Passed {
			var failed []string
			for _, g := range c.Grades {
				if !g.Pass {
					failed = append(failed, g.Grader)
				}
			}
			fmt.Fprintf(w, "  FAIL %s (%s) %s\n", c.Name, c.Status, strings.Join(failed, ", "))
		}
	}
	if cmp != nil {
		fmt.Fprint(w, cmp.String())
	}
	fmt.Fprintf(w, "wrote %s\n", strings.Join(written, ", "))
}

func cmdCompare(args []string, stdout, stderr io.Writer) (int, error) {
	var basePath, candPath string
	var t Thresholds
	err := flags("compare", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&basePath, "baseline", "", "the baseline report.json `file`")
		fs.StringVar(&candPath, "candidate", "", "the candidate report.json `file`")
		fs.Float64Var(&t.PassRateDrop, "pass-rate-drop", 0, "largest allowed drop of a grader's pass rate, 0..1 (negative: unchecked)")
		fs.Float64Var(&t.MeanScoreDrop, "mean-score-drop", 0, "largest allowed drop of a grader's mean score, 0..1")
		fs.Float64Var(&t.ScoreDrop, "score-drop", 0, "largest allowed drop of one case's score, 0..1")
		fs.Float64Var(&t.CostIncrease, "cost-increase", 0, "largest allowed relative rise of tokens or cost (0.2: 20%)")
	})
	switch {
	case err != nil:
		return 0, err
	case basePath == "" || candPath == "":
		return 0, &usageError{"--baseline and --candidate are both required: two report.json files"}
	}
	base, err := ReadReport(basePath)
	if err != nil {
		return 0, &usageError{err.Error()}
	}
	cand, err := ReadReport(candPath)
	if err != nil {
		return 0, &usageError{err.Error()}
	}
	cmp := Compare(base, cand, t)
	fmt.Fprint(stdout, cmp.String())
	if cmp.Regressed() {
		return ExitRegressed, nil
	}
	return ExitOK, nil
}
