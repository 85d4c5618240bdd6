package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom/internal/testbin"
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
	if path := os.Getenv(crashWriterEnv); path != "" {
		crashWriter(path) // the child a test kills: it never returns
	}
	if variant := os.Getenv(checkProgramEnv); variant != "" {
		checkProgram(variant) // the check program of deploy check: it never returns
	}
	if variant := os.Getenv(evalProgramEnv); variant != "" {
		evalProgram(variant) // the eval program of loom eval --with: it never returns
	}
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

// buildBinary builds cmd/loom into dir (with -race under -race).
func buildBinary(dir string) (string, error) { return testbin.Build(dir, "./cmd/loom", "loom") }

// binaryEnv is the environment of the binary: the variables the CLI falls
// back to are unset so that only the flags of a test count.
func binaryEnv() []string { return testbin.Env("LOOM_") }

// loomRun runs the binary to its end and returns its output and status.
func loomRun(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return testbin.Run(t, 60*time.Second, binaryEnv(), bin, args...)
}

// mustLoom runs the binary and fails the test unless it exits 0.
func mustLoom(t *testing.T, bin string, args ...string) string {
	t.Helper()
	return testbin.Must(t, 60*time.Second, binaryEnv(), bin, args...)
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
	return startBackground(t, bin, false, args...)
}

// startLoomMerged is startLoom with stderr sent into stdout, as on a
// terminal that shows both: its lines hold what both wrote.
func startLoomMerged(t *testing.T, bin string, args ...string) *background {
	t.Helper()
	return startBackground(t, bin, true, args...)
}

func startBackground(t *testing.T, bin string, merged bool, args ...string) *background {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = binaryEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if merged {
		cmd.Stderr = cmd.Stdout
	}
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
