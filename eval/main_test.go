package eval_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/eval"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
)

const suiteFile = "testdata/triage.suite.json"

// app is the triage app as the eval command gets it.
func app(t *testing.T, regressed bool) eval.App {
	return eval.App{Flows: []*loom.Flow{triageFlow(committed(t), regressed)}}
}

// runMain runs the command and returns its status, stdout and stderr.
func runMain(t *testing.T, a eval.App, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := eval.RunMain(context.Background(), a, args, &out, &errs)
	return code, out.String(), errs.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRunMainWritesReportsAndFlagsRegression runs the committed suite
// file: the baseline passes (exit 0) and its report.json is the report
// eval.Run gives for the same suite built in Go; the regressed candidate
// run against it exits 3 with comparison.json written; compare exits 3
// on the pair and 0 on the baseline with itself.
func TestRunMainWritesReportsAndFlagsRegression(t *testing.T) {
	base := t.TempDir()
	code, out, errs := runMain(t, app(t, false), "run", "--suite", suiteFile, "--out", base)
	if code != eval.ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "suite triage: 4/4 cases passed") {
		t.Errorf("stdout: %s", out)
	}
	want := runTriage(t, committed(t), false).JSON()
	if got := readFile(t, filepath.Join(base, "report.json")); !bytes.Equal(got, want) {
		t.Errorf("report.json is not the report of the same suite built in Go:\n%s\nwant:\n%s", got, want)
	}
	if md := readFile(t, filepath.Join(base, "report.md")); !bytes.Contains(md, []byte("**PASSED**: 4 of 4 cases passed")) {
		t.Errorf("report.md:\n%s", md)
	}

	cand := t.TempDir()
	code, out, errs = runMain(t, app(t, true), "run", "--suite", suiteFile, "--out", cand, "--baseline", filepath.Join(base, "report.json"))
	if code != eval.ExitRegressed {
		t.Fatalf("the regressed candidate exited %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !strings.Contains(out, "REGRESSION case latency same-outcome") {
		t.Errorf("stdout: %s", out)
	}
	if md := readFile(t, filepath.Join(cand, "report.md")); !bytes.Contains(md, []byte("## Against the baseline")) {
		t.Errorf("report.md has no comparison:\n%s", md)
	}
	if cmp := readFile(t, filepath.Join(cand, "comparison.json")); !bytes.Contains(cmp, []byte(`"metric": "costUsd"`)) {
		t.Errorf("comparison.json: %s", cmp)
	}

	if code, out, _ := runMain(t, eval.App{}, "compare", "--baseline", filepath.Join(base, "report.json"), "--candidate", filepath.Join(cand, "report.json")); code != eval.ExitRegressed {
		t.Errorf("compare of the regressed pair exited %d: %s", code, out)
	}
	if code, out, _ := runMain(t, eval.App{}, "compare", "--baseline", filepath.Join(base, "report.json"), "--candidate", filepath.Join(base, "report.json")); code != eval.ExitOK {
		t.Errorf("compare of the baseline with itself exited %d: %s", code, out)
	}
	if code, _, _ := runMain(t, app(t, true), "run", "--suite", suiteFile, "--out", t.TempDir()); code != eval.ExitFailed {
		t.Errorf("failing cases without a baseline exited %d, want %d", code, eval.ExitFailed)
	}
}

// TestRunMainRefusesBadSuiteFiles: a file that does not parse, and each
// kind of strictness refusal, exits 2 naming the file, the member and
// what to do.
func TestRunMainRefusesBadSuiteFiles(t *testing.T) {
	good := string(readFile(t, suiteFile))
	tests := []struct {
		name, content string
		want          []string
	}{
		{"not JSON", `{"format": "loom-eval-suite/1", "name": `, []string{"the file is not valid JSON (malformed JSON at byte", "fix the JSON there"}},
		{"unknown top member", strings.Replace(good, `"flow": "triage",`, `"flow": "triage", "flows": [],`, 1),
			[]string{"member flows is unknown", "the members allowed here are format, name, flow, cases, graders, thresholds", "remove it or fix its spelling"}},
		{"unknown case member", strings.Replace(good, `"expected": {"service": "search"`, `"expect": {"service": "search"`, 1),
			[]string{"member cases[1].expect is unknown", "name, input, answers, expected, log"}},
		{"case member in another case", strings.Replace(good, `"name": "latency"`, `"Name": "latency"`, 1),
			[]string{"member cases[0].Name is unknown"}},
		{"unknown answer member", strings.Replace(good, `{"gate": "approve:*", "payload": {"approved": true, "by": "ann"}}`, `{"gate": "approve:*", "answer": true}`, 1),
			[]string{"member cases[0].answers[0].answer is unknown", "gate, payload"}},
		{"unknown grader member", strings.Replace(good, `"pattern": "^(rollback`, `"regex": "^(rollback`, 1),
			[]string{"member graders[1].regex is unknown"}},
		{"unknown grader type", strings.Replace(good, `"type": "exact"`, `"type": "equal"`, 1),
			[]string{`member graders[0].type is "equal", not a grader type`, "use exact, regex, jsonSchema or llmJudge"}},
		{"duplicate member", strings.Replace(good, `"name": "triage",`, `"name": "triage", "name": "again",`, 1),
			[]string{"duplicate member name"}},
		{"wrong format", strings.Replace(good, "loom-eval-suite/1", "loom-eval-suite/9", 1),
			[]string{"member format", `write "format": "loom-eval-suite/1"`}},
		{"bad regex", strings.Replace(good, `"^(rollback|restart|scale-out)$"`, `"^(rollback"`, 1),
			[]string{"member graders[1].pattern is not a regular expression"}},
		{"unknown provider", strings.Replace(good, `"cassette": "cassette.json"`, `"provider": "openai"`, 1),
			[]string{"member graders[3].provider", "the app does not register"}},
		{"missing cassette", strings.Replace(good, `"cassette": "cassette.json"`, `"cassette": "none.json"`, 1),
			[]string{"member graders[3].cassette", "record it first"}},
		{"unknown threshold", strings.Replace(good, `"costIncrease": 0.1`, `"costRise": 0.1`, 1),
			[]string{"member thresholds.costRise is unknown"}},
		{"two cases one name", strings.Replace(good, `"name": "memory"`, `"name": "latency"`, 1),
			[]string{`two cases are named "latency"`}},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cassette.json"), readFile(t, cassetteRel), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "suite"+string(rune('a'+i))+".json")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errs := runMain(t, app(t, false), "run", "--suite", path, "--out", filepath.Join(dir, "out"))
			if code != eval.ExitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, eval.ExitUsage, errs)
			}
			for _, w := range append(tc.want, "eval: suite file "+path) {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Error("a refused suite file wrote reports")
	}
}

// TestRunMainUsage: bad invocations exit 2 with a message.
func TestRunMainUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"walk"},
		{"run", "--out", "x"},
		{"run", "--suite", suiteFile},
		{"run", "--suite", suiteFile, "--out", "x", "extra"},
		{"run", "--suite", "testdata/none.json", "--out", "x"},
		{"run", "--suite", suiteFile, "--out", "x", "--baseline", "testdata/none.json"},
		{"compare", "--baseline", "a.json"},
		{"run", "--bogus"},
	} {
		if code, _, errs := runMain(t, app(t, false), args...); code != eval.ExitUsage || errs == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, errs, eval.ExitUsage)
		}
	}
	if code, _, errs := runMain(t, eval.App{}, "run", "--suite", suiteFile, "--out", t.TempDir()); code != eval.ExitUsage ||
		!strings.Contains(errs, `runs flow "triage", which this binary does not register`) {
		t.Errorf("a suite of a flow the binary lacks: exit %d, stderr %s", code, errs)
	}
	if code, out, _ := runMain(t, eval.App{}, "help"); code != eval.ExitOK || !strings.Contains(out, "exit status: 0 ok") {
		t.Errorf("help: exit %d: %s", code, out)
	}
}

// TestSuiteFileFixtureCase builds a case from a log file ("log"), the
// golden-history shape, and runs it.
func TestSuiteFileFixtureCase(t *testing.T) {
	rep := runTriage(t, committed(t), false)
	log := caseOf(t, rep, "memory").Log
	var b bytes.Buffer
	b.WriteString(`{"format": "loom-golden-history/1", "events": [`)
	for i, e := range log {
		raw, err := event.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteString(",\n")
		}
		b.Write(raw)
	}
	b.WriteString("]}")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.json"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `{"format": "loom-eval-suite/1", "name": "fixtures", "flow": "triage",
		"cases": [{"name": "memory-fixture", "log": "memory.json"}], "graders": [{"type": "exact"}]}`
	s, err := eval.ParseSuiteFile("fixtures.json", []byte(src), eval.SuiteFileOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cases[0].Name != "memory-fixture" || len(s.Cases[0].Answers) != 1 {
		t.Fatalf("fixture case: %+v", s.Cases[0])
	}
	got, err := eval.Run(context.Background(), loom.Config{Flows: []*loom.Flow{triageFlow(committed(t), false)}}, s)
	if err != nil || !got.Passed {
		t.Fatalf("the fixture does not reproduce: %v\n%s", err, got.Markdown(nil))
	}
	mixed := strings.Replace(src, `"log": "memory.json"`, `"log": "memory.json", "input": {}`, 1)
	if _, err := eval.ParseSuiteFile("mixed.json", []byte(mixed), eval.SuiteFileOptions{Dir: dir}); err == nil ||
		!strings.Contains(err.Error(), `member cases[0].input cannot be given with "log"`) {
		t.Errorf("a fixture with an input: %v", err)
	}
}

var _ llm.Provider = (*llm.Cassette)(nil)
