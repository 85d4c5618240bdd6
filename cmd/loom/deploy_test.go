package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/replay"
)

// checkProgramEnv makes this test binary the check program of deploy
// check, with the fixture's flows at the version it names: "same" (the
// fixture's code) or "renamed" (the order flow's first step renamed).
const checkProgramEnv = "LOOM_CLI_CHECK_PROGRAM"

func checkProgram(variant string) {
	order := orderFlow()
	if variant == "renamed" {
		order = orderFlowWith("quote-v2")
	}
	replay.Main(loom.Config{Flows: []*loom.Flow{order, refundFlow(), flakyFlow()}})
}

// deployCheck runs loom deploy check on the fixture with the check program
// at variant.
func deployCheck(t *testing.T, bin, store, variant string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(binaryEnv(), checkProgramEnv+"="+variant)
	args = append([]string{"deploy", "check", "--store", store, "--with", self}, args...)
	return testbin.Run(t, 120e9, env, bin, args...)
}

func TestDeployCheckReportsEachInFlightExecutionAndWritesNothing(t *testing.T) {
	bin, fx := setup(t)
	dir := filepath.Dir(fx.path)
	before := testbin.DirSums(t, dir)

	out, errOut, code := deployCheck(t, bin, fx.path, "same")
	if code != exitOK || !strings.Contains(out, "checked 13 executions against shop.flaky, shop.order, shop.refund: 13 compatible, 0 incompatible") {
		t.Fatalf("unchanged code: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = deployCheck(t, bin, fx.path, "renamed", "--json")
	if code != exitCheckFailed {
		t.Fatalf("renamed step: exit %d\n%s%s", code, out, errOut)
	}
	var rep replay.Report
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Checked != 13 || rep.Incompatible != 13 || rep.ByVerdict[loom.ReplayDiverged] != 13 {
		t.Fatalf("report %+v", rep)
	}
	for _, x := range rep.Executions {
		if x.Expected != `step "quote"` || x.Got != `step "quote-v2"` || x.Sequence == nil || *x.Sequence != 1 ||
			!strings.Contains(x.Path, "fixture_test.go") {
			t.Fatalf("%s", x)
		}
	}
	if !strings.Contains(errOut, "13 of 13 executions would not replay under the new code") {
		t.Fatalf("stderr: %s", errOut)
	}

	out, errOut, code = deployCheck(t, bin, fx.path, "same", "--ended", "-1")
	if code != exitOK || !strings.Contains(out, "compatible, 0 incompatible") || strings.Contains(out, "checked 13 ") {
		t.Fatalf("with the ended ones: exit %d\n%s%s", code, out, errOut)
	}
	testbin.SameSums(t, "deploy check", before, testbin.DirSums(t, dir))
}

func TestDeployCheckRefusesWhatIsNotACheckProgram(t *testing.T) {
	bin, fx := setup(t)
	if _, errOut, code := loomRun(t, bin, "deploy", "check", "--store", fx.path); code != exitUsage ||
		!strings.Contains(errOut, "--with is required") {
		t.Fatalf("no --with: exit %d: %s", code, errOut)
	}
	if _, errOut, code := loomRun(t, bin, "deploy", "check", "--store", fx.path, "--with", "/bin/true"); code != exitUsage ||
		!strings.Contains(errOut, "does not speak the check protocol") {
		t.Fatalf("not a check program: exit %d: %s", code, errOut)
	}
	if _, errOut, code := loomRun(t, bin, "deploy", "check", "--store", fx.path, "--with", filepath.Join(t.TempDir(), "missing")); code != exitUsage {
		t.Fatalf("a missing program: exit %d: %s", code, errOut)
	}
}
