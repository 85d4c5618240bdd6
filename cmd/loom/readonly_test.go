package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/testbin"
)

// crashWriterEnv names the variable that makes the test binary the crashed
// writer: an app over the store it names that commits more work and is
// killed in the middle of a charge.
const crashWriterEnv = "LOOM_CLI_CRASH_WRITER"

// crashWriter is the writer process a test kills with SIGKILL: over path
// (a copy of the fixture) it completes crash-1, parks crash-2, and answers
// order-2, whose charge then blocks — its STEP_STARTED durable, its outcome
// never recorded — printing "charging" for the parent to kill it. Its
// commits are in the -wal only: nothing checkpointed them.
func crashWriter(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash writer:", err)
		os.Exit(3)
	}
	a, err := openApp(path, newStepClock("2026-01-07T09:00:00Z"))
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	if _, err := a.rt.Start(ctx, flowRefund, 5, loom.WithExecutionID("crash-1")); err != nil {
		fail(err)
	}
	if _, err := a.rt.WaitForCompletion(ctx, "crash-1"); err != nil {
		fail(err)
	}
	if _, err := a.rt.Start(ctx, flowOrder, order{Item: "matcha", Qty: 4}, loom.WithExecutionID("crash-2")); err != nil {
		fail(err)
	}
	if _, err := a.rt.WaitForSuspend(ctx, "crash-2"); err != nil {
		fail(err)
	}
	chargeHook = func() {
		fmt.Println("charging")
		select {} // until killed
	}
	payload, _ := json.Marshal(approval{Approved: true})
	if err := a.rt.Resume(ctx, "order-2", loom.ResumeEvent{EventType: gate, Payload: payload, Credentials: json.RawMessage(`{"user":"zoe"}`)}); err != nil {
		fail(err)
	}
	select {}
}

// crashedStore copies the fixture into a new directory, runs the crash
// writer over it and kills it while it charges: the store a killed app
// leaves, with its -wal and -shm.
func crashedStore(t *testing.T, fx fixture) string {
	t.Helper()
	path := copyStore(t, fx.path)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	charging := false
	for !charging && sc.Scan() {
		charging = sc.Text() == "charging"
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: its status says so
	if !charging {
		t.Fatalf("the crash writer ended before charging: %s", errOut.String())
	}
	if info, err := os.Stat(path + "-wal"); err != nil || info.Size() == 0 {
		t.Fatalf("the killed writer left no -wal: %v", err)
	}
	if _, err := os.Stat(path + "-shm"); err != nil {
		t.Fatalf("the killed writer left no -shm: %v", err)
	}
	return path
}

// olderStore copies the fixture and takes it back to schema version 5, as
// a release before the leases and the status index wrote it.
func olderStore(t *testing.T, fx fixture) string {
	t.Helper()
	path := copyStore(t, fx.path)
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE IF EXISTS leases`, `DROP TABLE IF EXISTS unfinished`,
		`DELETE FROM schema_migrations WHERE version > 5`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readOnlyCommands runs every read-only command against the store at path
// — ls, state, logs (follow included), diff, replay-check, gate --store and
// the inspector's API — and returns what ls --json listed and what logs
// printed for order-2.
func readOnlyCommands(t *testing.T, bin, path string) (lsPage, string) {
	t.Helper()
	for _, args := range [][]string{
		{"ls"},
		{"ls", "--sort", "updated", "--limit", "5"},
		{"ls", "--sort", "status", "--status", "suspended"},
		{"state", "order-1"},
		{"state", "order-1", "--json", "--at", "3"},
		{"state", "order-2", "--internal"},
		{"logs", "order-1"},
		{"logs", "order-1", "--json", "--from", "2"},
		{"logs", "flaky-1", "--internal"},
		{"logs", "order-1", "--follow"}, // completed: it exits at once
		{"diff", "order-1", "--from", "0"},
		{"replay-check", "order-1"},
		{"gate", "order-3"},
		{"gate", "bulk-01", "--json"},
	} {
		mustLoom(t, bin, append(args, "--store", path)...)
	}
	var page lsPage
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", path, "--json", "--limit", "100"), &page)
	logs := mustLoom(t, bin, "logs", "order-2", "--store", path)

	srv := startLoom(t, bin, "inspect", "--store", path)
	line := srv.waitLine(t, "Inspecting ", 30*time.Second)
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) \(read-only`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no URL in %q", line)
	}
	for _, api := range []string{"api/executions?limit=100", "api/events?id=order-1", "api/state?id=order-1&at=2", "api/refs", "api/state?id=crash-2"} {
		resp, err := http.Get(m[1] + api)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && !(strings.Contains(api, "crash-2") && resp.StatusCode == http.StatusNotFound) {
			t.Fatalf("GET %s: %d %s", api, resp.StatusCode, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m[1]+"api/live?id=order-1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("the live stream: %v", err)
	}
	resp.Body.Close()
	if err := srv.interrupt(t); err != nil {
		t.Fatalf("loom inspect after Ctrl-C: %v", err)
	}
	return page, logs
}

func listed(page lsPage) map[string]fold.Status {
	out := map[string]fold.Status{}
	for _, l := range page.Executions {
		out[l.ExecutionID] = l.Status
	}
	return out
}

// TestReadOnlyCommandsChangeNothing runs every read-only command against a
// clean store, the store an app killed with SIGKILL in the middle of a
// charge left (its commits only in the -wal), and an older-schema store:
// the checksums of the database file and of every file beside it are the
// same before and after, no file appears, and the crashed writer's
// committed events are all shown.
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	bin, fx := setup(t)
	t.Run("clean", func(t *testing.T) {
		path := copyStore(t, fx.path)
		before := testbin.DirSums(t, filepath.Dir(path))
		page, _ := readOnlyCommands(t, bin, path)
		testbin.SameSums(t, "the read-only commands on a clean store", before, testbin.DirSums(t, filepath.Dir(path)))
		if got := listed(page); got["order-1"] != fold.StatusCompleted || got["order-2"] != fold.StatusSuspended {
			t.Fatalf("ls: %v", got)
		}
	})
	t.Run("crashed writer", func(t *testing.T) {
		path := crashedStore(t, fx)
		before := testbin.DirSums(t, filepath.Dir(path))
		page, logs := readOnlyCommands(t, bin, path)
		testbin.SameSums(t, "the read-only commands on a crashed writer's store", before, testbin.DirSums(t, filepath.Dir(path)))
		got := listed(page)
		if got["crash-1"] != fold.StatusCompleted || got["crash-2"] != fold.StatusSuspended || got["order-2"] != fold.StatusRunning {
			t.Fatalf("the crashed writer's committed work is not all shown: crash-1 %s, crash-2 %s, order-2 %s", got["crash-1"], got["crash-2"], got["order-2"])
		}
		if !strings.Contains(logs, `APPROVAL_GRANTED     {"user":"zoe"} for approve`) || !strings.Contains(logs, "STEP_STARTED         charge") {
			t.Fatalf("logs of order-2 miss the crashed writer's commits:\n%s", logs)
		}
	})
	t.Run("older schema", func(t *testing.T) {
		path := olderStore(t, fx)
		before := testbin.DirSums(t, filepath.Dir(path))
		page, _ := readOnlyCommands(t, bin, path)
		testbin.SameSums(t, "the read-only commands on an older-schema store", before, testbin.DirSums(t, filepath.Dir(path)))
		if got := listed(page); got["order-1"] != fold.StatusCompleted || len(got) != len(fx.ids()) {
			t.Fatalf("ls of an older store: %v", got)
		}
	})
}

// ids lists the fixture's executions.
func (fx fixture) ids() []string {
	return append(append([]string{}, bulkIDs...), "flaky-1", "order-1", "order-1-what-if", "order-2", "order-3", "refund-1", "refund-2")
}

// TestSpecialFileStoreRefusedAtOnce: a named pipe as --store is refused at
// once (reading it would block forever), as is a directory; nothing waits.
func TestSpecialFileStoreRefusedAtOnce(t *testing.T) {
	bin, _ := setup(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"ls", "--store", fifo}, "is a named pipe (FIFO), not a database file"},
		{[]string{"logs", "x", "--follow", "--store", fifo}, "is a named pipe (FIFO)"},
		{[]string{"inspect", "--store", fifo}, "is a named pipe (FIFO)"},
		{[]string{"ls", "--store", dir}, "is a directory"},
	} {
		start := time.Now()
		_, errOut, code := testbin.Run(t, 10*time.Second, binaryEnv(), bin, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.says) || time.Since(start) > 9*time.Second {
			t.Errorf("loom %v: exit %d, stderr %q; want exit 2 saying %q at once", tc.args, code, errOut, tc.says)
		}
	}
	if _, err := os.Stat(fifo + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("a -wal appeared beside the pipe: %v", err)
	}
}
