package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests run the real binary, built once per test binary, against the
// fixture store, also built once.

var (
	shared struct {
		dir     string
		bin     string
		fixture fixture
		err     error
	}
	sharedOnce sync.Once
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loom-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.dir = dir
	code := m.Run()
	_ = os.RemoveAll(dir) // a temporary directory: nothing to report if it lingers
	os.Exit(code)
}

// setup builds the loom binary and the fixture store once per test binary,
// concurrently.
func setup(t *testing.T) (bin string, fx fixture) {
	t.Helper()
	sharedOnce.Do(func() {
		var wg sync.WaitGroup
		var buildErr, fxErr error
		wg.Go(func() { shared.bin, buildErr = buildBinary(shared.dir) })
		wg.Go(func() { shared.fixture, fxErr = buildFixture(filepath.Join(shared.dir, "shop.db")) })
		wg.Wait()
		shared.err = errors.Join(buildErr, fxErr)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.bin, shared.fixture
}

// buildBinary builds cmd/loom into dir. Under -race the binary is built with
// -race too: it reuses the packages the test binary was compiled from, so
// only linking is left.
func buildBinary(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	bin := filepath.Join(dir, "loom")
	args := []string{"build", "-o", bin}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	cmd := exec.Command("go", append(args, "./cmd/loom")...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// binaryEnv is the environment of the binary: a race-enabled binary sleeps
// 1 s at exit by default, and the variables the CLI falls back to are unset
// so that only the flags of a test count.
func binaryEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOOM_") {
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// loomRun runs the binary to its end and returns its output and status.
func loomRun(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = binaryEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running loom %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// mustLoom runs the binary and fails the test unless it exits 0.
func mustLoom(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, errOut, code := loomRun(t, bin, args...)
	if code != 0 {
		t.Fatalf("loom %v exited %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
	}
	return out
}

// background is a long-running loom process (logs --follow, inspect).
type background struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

// startLoom starts the binary and delivers its stdout line by line.
func startLoom(t *testing.T, bin string, args ...string) *background {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = binaryEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &background{cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
		close(b.lines)
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w; stderr: %s", err, errOut.String())
		}
		b.done <- err
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // only if a test failed before stopping it
		}
	})
	return b
}

// waitLine waits for a line containing want and returns it.
func (b *background) waitLine(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-b.lines:
			if !ok {
				t.Fatalf("the process ended before printing %q: %v", want, <-b.done)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-deadline.C:
			t.Fatalf("no line containing %q within %s", want, timeout)
		}
	}
}

// interrupt sends SIGINT and returns the process's exit error.
func (b *background) interrupt(t *testing.T) error {
	t.Helper()
	if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not stop within 30s of SIGINT")
		return nil
	}
}
