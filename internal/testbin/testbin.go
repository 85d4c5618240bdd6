// Package testbin builds a command of this module and runs it, for tests
// that exercise a real binary (the loom CLI, the example app): built with
// -race when the test binary is, run to its end with its output and exit
// status.
package testbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// Build compiles the package pkg (a path from the module root, such as
// "./cmd/loom") into dir/name and returns the binary's path. Under -race
// the binary is built with -race too: it reuses the packages the test
// binary was compiled from, so only linking is left.
func Build(dir, pkg, name string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// Env is this process's environment without the variables drop names (by
// prefix), with GORACE telling a race-enabled binary not to sleep 1 s at
// exit.
func Env(drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, drop) {
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Run runs bin with args and env to its end, at most timeout (a bound on a
// hang, not a measurement), and returns its output and exit status. Only a
// binary that could not be run fails the test.
func Run(t testing.TB, timeout time.Duration, env []string, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s %v: %v", filepath.Base(bin), args, err)
	}
	return out.String(), errOut.String(), code
}

// Must runs bin like Run and fails the test unless it exits 0; it returns
// the standard output.
func Must(t testing.TB, timeout time.Duration, env []string, bin string, args ...string) string {
	t.Helper()
	out, errOut, code := Run(t, timeout, env, bin, args...)
	if code != 0 {
		t.Fatalf("%s %v exited %d\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, code, out, errOut)
	}
	return out
}
