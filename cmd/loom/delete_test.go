package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/testbin"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// snapshotsOf lists an execution's snapshot sequences straight from a
// store file.
func snapshotsOf(t *testing.T, path, id string) []int64 {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var lister store.SnapshotLister = db.SnapshotStore()
	seqs, err := lister.ListSequences(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

// TestDeleteCommandDeletesOneEndedExecution: loom delete --dry-run says
// what would go and writes nothing; loom delete removes the execution's log
// and snapshots and leaves every other execution as it was; progress goes
// to stderr, never to stdout.
func TestDeleteCommandDeletesOneEndedExecution(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	dir := filepath.Dir(path)
	logLen := len(readLog(t, path, "order-3"))
	snaps := snapshotsOf(t, path, "order-3")
	others := map[string]int{}
	for _, id := range append([]string{"order-1", "order-2", "refund-1", "flaky-1"}, bulkIDs...) {
		others[id] = len(readLog(t, path, id))
	}
	if logLen == 0 || len(snaps) == 0 {
		t.Fatalf("the fixture's order-3: %d events, snapshots %v", logLen, snaps)
	}

	before := testbin.DirSums(t, dir)
	var dry loom.DeleteReport
	decodeJSON(t, mustLoom(t, bin, "delete", "order-3", "--store", path, "--dry-run", "--json"), &dry)
	if !dry.DryRun || dry.ExecutionID != "order-3" || dry.Events != int64(logLen) || dry.Snapshots != len(snaps) {
		t.Fatalf("dry run: %+v; want %d events and %d snapshots", dry, logLen, len(snaps))
	}
	if out := mustLoom(t, bin, "delete", "order-3", "--store", path, "--dry-run"); !strings.HasPrefix(out, "would delete order-3 from "+path+": ") {
		t.Fatalf("dry run text: %q", out)
	}
	testbin.SameSums(t, "a dry run", before, testbin.DirSums(t, dir))

	out := mustLoom(t, bin, "delete", "order-3", "--store", path)
	if !strings.HasPrefix(out, "deleted order-3 from "+path+": ") || !strings.Contains(out, " events, ") {
		t.Fatalf("delete: %q", out)
	}
	if n := len(readLog(t, path, "order-3")); n != 0 {
		t.Fatalf("order-3 still has %d events", n)
	}
	if s := snapshotsOf(t, path, "order-3"); len(s) != 0 {
		t.Fatalf("order-3 still has snapshots %v", s)
	}
	for id, n := range others { //loom:order-independent each is checked alone
		if got := len(readLog(t, path, id)); got != n {
			t.Fatalf("%s: %d events, had %d", id, got, n)
		}
	}
	if _, errOut, code := loomRun(t, bin, "delete", "order-3", "--store", path); code != exitNotFound || !strings.Contains(errOut, `no execution "order-3"`) {
		t.Fatalf("a second delete: exit %d %s", code, errOut)
	}

	// Progress on stderr; stdout is the JSON alone.
	stdout, errOut, code := loomRun(t, bin, "delete", "refund-1", "--store", path, "--json", "--progress", "always")
	if code != 0 || !strings.Contains(errOut, "delete: deleting refund-1 in "+path) || strings.Contains(stdout, "delete:") || strings.Contains(stdout, "\r") {
		t.Fatalf("--progress always: exit %d\nstdout %q\nstderr %q", code, stdout, errOut)
	}
	var rep loom.DeleteReport
	decodeJSON(t, stdout, &rep)
	if rep.DryRun || rep.ExecutionID != "refund-1" || rep.Events == 0 {
		t.Fatalf("delete --json: %+v", rep)
	}
	if _, errOut, _ := loomRun(t, bin, "delete", "refund-2", "--store", path, "--dry-run"); errOut != "" {
		t.Fatalf("progress on a stderr that is not a terminal: %q", errOut)
	}
}

// TestDeleteCommandRefusalsDeleteNothing: an execution that has not ended
// and one a branch ref points at are refused with exit 5 (their reason in
// --json's data), an unknown one with exit 4, and a missing --store with
// exit 2; the store's files are byte for byte as they were.
func TestDeleteCommandRefusalsDeleteNothing(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	dir := filepath.Dir(path)
	before := testbin.DirSums(t, dir)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"delete", "order-2", "--store", path}, exitRefused, "refused (not-ended): it is suspended, not ended: cancel it first"},
		{[]string{"delete", "bulk-03", "--store", path, "--dry-run"}, exitRefused, "refused (not-ended)"},
		{[]string{"delete", "order-1", "--store", path}, exitRefused, `refused (pinned-by-ref): the branch ref "main" points at it`},
		{[]string{"delete", "order-1-what-if", "--store", path}, exitRefused, `the branch ref "what-if" points at it`},
		{[]string{"delete", "nope", "--store", path}, exitNotFound, `no execution "nope"`},
		{[]string{"delete", "order-3"}, exitUsage, "--store is required"},
		{[]string{"delete", "--store", path}, exitUsage, "want <id>"},
		{[]string{"delete", "order-3", "--store", filepath.Join(dir, "missing.db")}, exitNotFound, "no store"},
	} {
		_, errOut, code := loomRun(t, bin, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit %d, want %d saying %q:\n%s", c.args, code, c.code, c.says, errOut)
		}
	}
	var je jsonError
	stdout, _, code := loomRun(t, bin, "delete", "order-2", "--store", path, "--json")
	decodeJSON(t, stdout, &je)
	var data struct{ ExecutionID, Reason string }
	decodeJSON(t, string(je.Data), &data)
	if code != exitRefused || je.ExitStatus != exitRefused || data.Reason != "not-ended" || data.ExecutionID != "order-2" {
		t.Fatalf("a refusal with --json: exit %d, %+v", code, je)
	}
	testbin.SameSums(t, "the refused deletes", before, testbin.DirSums(t, dir))
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Fatalf("a delete against a missing store created it: %v", err)
	}
}

// The store-writing commands that may run long show what they wait for on
// stderr with --progress always, and stdout keeps the JSON alone.
func TestStoreWritingCommandsShowProgressOnStderr(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"terminalTtl":"1h"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"retention", "run", "--store", path, "--policy", policy, "--dry-run"}, "retention: counting what the policy expires in " + path},
		{[]string{"compact", "order-2", "--through", "2", "--store", path}, "compact: moving the history of order-2 through #2 into the archive of " + path},
	} {
		stdout, errOut, code := loomRun(t, bin, append(c.args, "--json", "--progress", "always")...)
		if code != 0 || !strings.Contains(errOut, c.says) || strings.Contains(stdout, "\r") {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q", c.args, code, stdout, errOut)
		}
		var v map[string]any
		decodeJSON(t, stdout, &v)
	}
}
