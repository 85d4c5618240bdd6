package testbin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/internal/testbin"
)

func TestRunReportsOutputAndStatus(t *testing.T) {
	out, errOut, code := testbin.Run(t, 10*time.Second, nil, "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
	if out != "out\n" || errOut != "err\n" || code != 3 {
		t.Fatalf("got %q %q %d", out, errOut, code)
	}
	if got := testbin.Must(t, 10*time.Second, nil, "/bin/sh", "-c", "echo fine"); got != "fine\n" {
		t.Fatalf("Must = %q", got)
	}
}

func TestEnvDropsPrefixesAndQuietsRaceExit(t *testing.T) {
	t.Setenv("LOOM_TESTBIN_X", "1")
	env := strings.Join(testbin.Env("LOOM_TESTBIN_"), "\n")
	if strings.Contains(env, "LOOM_TESTBIN_X") || !strings.Contains(env, "atexit_sleep_ms=0") {
		t.Fatalf("env:\n%s", env)
	}
}
