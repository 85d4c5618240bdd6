package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/internal/testbin"
)

// evalProgramEnv makes this test binary an app's eval program with one
// flow, "echo", which returns its input with a suffix: "" or the variant.
const evalProgramEnv = "LOOM_CLI_EVAL_PROGRAM"

func evalProgram(variant string) {
	suffix := ""
	if variant == "regressed" {
		suffix = "?"
	}
	echo := loom.NewFlow("echo", func(_ *loom.Context, in string) (string, error) { return in + suffix, nil })
	eval.Main(eval.App{Flows: []*loom.Flow{echo}})
}

const echoSuite = `{
  "format": "loom-eval-suite/1",
  "name": "echo",
  "flow": "echo",
  "cases": [{"name": "hi", "input": "hi", "expected": "hi"}],
  "graders": [{"type": "exact"}]
}
`

func TestEvalRunsTheAppsProgramAndComparesReports(t *testing.T) {
	bin, _ := setup(t)
	dir := t.TempDir()
	suite := filepath.Join(dir, "echo.json")
	if err := os.WriteFile(suite, []byte(echoSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(variant string, args ...string) (string, string, int) {
		env := append(binaryEnv(), evalProgramEnv+"="+variant)
		return testbin.Run(t, 60e9, env, bin, append([]string{"eval", "--with", self}, args...)...)
	}
	base := filepath.Join(dir, "base")
	if out, errOut, code := run("same", "run", "--suite", suite, "--out", base); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []string{"report.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(base, f)); err != nil {
			t.Fatal(err)
		}
	}
	cand := filepath.Join(dir, "cand")
	if out, errOut, code := run("regressed", "run", "--suite", suite, "--out", cand, "--baseline", filepath.Join(base, "report.json")); code != eval.ExitRegressed {
		t.Fatalf("regressed: exit %d\n%s%s", code, out, errOut)
	}
	// compare needs no program.
	if out, errOut, code := loomRun(t, bin, "eval", "compare", "--baseline", filepath.Join(base, "report.json"),
		"--candidate", filepath.Join(cand, "report.json")); code != eval.ExitRegressed {
		t.Fatalf("compare: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := loomRun(t, bin, "eval", "run", "--suite", suite, "--out", filepath.Join(dir, "x")); code != exitUsage ||
		!strings.Contains(errOut, `"echo"`) {
		t.Fatalf("run without the app's program: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := loomRun(t, bin, "eval", "--with", filepath.Join(dir, "missing"), "run"); code != exitUsage {
		t.Fatalf("a missing program: exit %d\n%s", code, errOut)
	}
}
