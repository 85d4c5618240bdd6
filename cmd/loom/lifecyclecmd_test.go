package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/testbin"
)

func TestCompactMovesHistoryAndTheReadersShowIt(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	before := readLog(t, path, "order-1")
	stateBefore := mustLoom(t, bin, "state", "order-1", "--store", path, "--json")

	out := mustLoom(t, bin, "compact", "order-1", "--through", "4", "--store", path)
	if !strings.Contains(out, "order-1: moved 4 events (#1–#4) into the archive") {
		t.Fatalf("compact: %s", out)
	}
	if after := readLog(t, path, "order-1"); len(after) != len(before)-4 || after[1].Sequence != 5 {
		t.Fatalf("the log after compaction holds %d events, from #%d", len(after), after[1].Sequence)
	}
	if got := mustLoom(t, bin, "state", "order-1", "--store", path, "--json"); got != stateBefore {
		t.Fatalf("state after compaction:\n%s\nwant\n%s", got, stateBefore)
	}
	if logs := mustLoom(t, bin, "logs", "order-1", "--store", path); !strings.Contains(logs, "… #1–#4 compacted (in the archive)") {
		t.Fatalf("logs:\n%s", logs)
	}
	var res loom.CompactResult
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "compact", "order-1", "--through", "3", "--store", path, "--json")), &res); err != nil ||
		res.Archived != 0 || res.Through != 4 {
		t.Fatalf("a second compaction below the point: %+v %v", res, err)
	}
}

func TestCompactAndRetentionRefusalsWriteNothing(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	dir := filepath.Dir(path)
	before := testbin.DirSums(t, dir)
	bad := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(bad, []byte(`{"terminalTTL":"24h"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"compact", "order-1", "--store", path}, exitUsage, "--through is required"},
		{[]string{"compact", "order-1", "--through", "0", "--store", path}, exitUsage, "always stays"},
		{[]string{"compact", "order-1", "--through", "999", "--store", path}, exitUsage, "always stays"},
		{[]string{"compact", "nope", "--through", "2", "--store", path}, exitNotFound, "no execution"},
		{[]string{"compact", "order-1", "--through", "2", "--store", filepath.Join(dir, "missing.db")}, exitNotFound, "no store"},
		{[]string{"retention", "run", "--store", path}, exitUsage, "--policy is required"},
		{[]string{"retention", "run", "--store", path, "--policy", bad}, exitUsage, "terminalTTL"},
	} {
		_, errOut, code := loomRun(t, bin, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Fatalf("%v: exit %d, want %d saying %q:\n%s", c.args, code, c.code, c.says, errOut)
		}
	}
	testbin.SameSums(t, "the refused commands", before, testbin.DirSums(t, dir))
}

func TestRetentionRunDryRunCountsAndRunDeletes(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	policy := filepath.Join(t.TempDir(), "policy.json")
	// The fixture's clock stands in January 2026: every ended execution is
	// past a one-hour TTL by now.
	if err := os.WriteFile(policy, []byte(`{"terminalTtl":"1h"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	before := testbin.DirSums(t, dir)
	var dry loom.RetentionReport
	if err := json.Unmarshal([]byte(mustLoom(t, bin, "retention", "run", "--store", path, "--policy", policy, "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || len(dry.Executions) == 0 || dry.KeptByRef != 2 {
		t.Fatalf("dry run: %+v", dry)
	}
	out := mustLoom(t, bin, "retention", "run", "--store", path, "--policy", policy)
	if !strings.HasPrefix(out, "deleted ") {
		t.Fatalf("run: %s", out)
	}
	for _, id := range dry.Executions {
		if log := readLog(t, path, id); len(log) != 0 {
			t.Fatalf("%s still has %d events", id, len(log))
		}
	}
	if log := readLog(t, path, "order-1"); len(log) == 0 {
		t.Fatal("order-1, which the ref main points at, was deleted")
	}
	_ = before
}

func TestStateShowsACryptoShreddedSubject(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	c := &cli{ctx: t.Context()}
	err := c.withWritableStore(path, func(w *writableStore) error {
		return w.rt.MarkShredded(t.Context(), "order-2", "customer-9")
	})
	if err != nil {
		t.Fatal(err)
	}
	out := mustLoom(t, bin, "state", "order-2", "--store", path)
	if !strings.Contains(out, "the data of subject customer-9 was crypto-shredded") {
		t.Fatalf("state:\n%s", out)
	}
}
