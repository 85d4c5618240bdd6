package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// transcript is what a run prints, process ids aside: the first process
// runs both steps and dies inside the second; the second process runs only
// the second step again (the first is served from the log), answers the
// gate and completes.
var transcript = regexp.MustCompile(`\A` +
	`process (\d+): starting hello-1\n` +
	`process (\d+): step greet ran\n` +
	`process (\d+): step shout ran\n` +
	`process (\d+): the first process died \(exit status 3\) and left hello-1 running\n` +
	`process (\d+): step shout ran\n` +
	`process (\d+): recovered hello-1 up to gate approve; answering true\n` +
	`process (\d+): hello-1 completed with "HELLO, WORLD!"; this process ran \[shout\], the rest was served from the log\n\z`)

// checkTranscript fails unless out is the transcript, the first three
// lines from one process and the last four from another.
func checkTranscript(t *testing.T, out string) {
	t.Helper()
	m := transcript.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("unexpected transcript:\n%s", out)
	}
	first, second := m[1], m[4]
	if first == second || m[2] != first || m[3] != first || m[5] != second || m[6] != second || m[7] != second {
		t.Fatalf("lines attributed to the wrong processes:\n%s", out)
	}
}

func TestHelloCrashesAndResumes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, err := testbin.Build(dir, "./examples/hello", "hello")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "hello.db")
	checkTranscript(t, testbin.Must(t, time.Minute, testbin.Env(), bin, db))

	// The log says the same as the transcript: one start, one recovery,
	// greet started and completed once, shout completed once, one park and
	// its answer. (The first
	// process's start of shout may or may not have reached the disk before
	// the crash: an idempotent step's start is written behind.)
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	events, err := st.Events.ReadFrom(context.Background(), "hello-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range events {
		var p struct {
			StepID string `json:"stepId"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatalf("#%d %s: %v", e.Sequence, e.Type, err)
		}
		count[e.Type+" "+p.StepID]++
	}
	if n := count[event.StepStarted+" shout"]; n != 1 && n != 2 {
		t.Errorf("shout started %d times in the log, want 1 or 2", n)
	}
	for key, want := range map[string]int{
		event.ExecutionStarted + " ":   1,
		event.ExecutionRecovered + " ": 1,
		event.StepCompleted + " greet": 1,
		event.StepStarted + " greet":   1,
		event.StepCompleted + " shout": 1,
		event.ExecutionCompleted + " ": 1,
		event.ExecutionSuspended + " ": 1,
		event.ExecutionResumed + " ":   1,
	} {
		if count[key] != want {
			t.Errorf("%q appears %d times in the log, want %d (log: %v)", key, count[key], want, count)
		}
	}
}

// TestHelloInANewModule does what a new user does: a module of their own
// with the example's code, requiring the kernel (through a replace, as it
// is not published from here), go mod tidy, go run.
func TestHelloInANewModule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/hello\n\ngo 1.26\n\n" +
		"require github.com/loom-kernel/loom v0.0.0\n\n" +
		"replace github.com/loom-kernel/loom => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // known checksums: no lookup for what the kernel already pins
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(testbin.Env("GOFLAGS=", "GOWORK="), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	gocmd := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	gocmd("mod", "tidy")
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tidied), "github.com/loom-kernel/loom v0.0.0") {
		t.Fatalf("go mod tidy dropped the kernel:\n%s", tidied)
	}
	checkTranscript(t, gocmd("run", "."))
}
