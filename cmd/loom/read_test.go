package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/snapshot"
	"github.com/loom-kernel/loom/spec"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/wire"
)

// TestLs lists the fixture: the table, --json, the filters, paging and
// progress only where asked for.
func TestLs(t *testing.T) {
	bin, fx := setup(t)
	out := mustLoom(t, bin, "ls", "--store", fx.path, "--limit", "100")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^EXECUTION\s+FLOW\s+STATUS\s+EVENTS\s+UPDATED\s+NOTE$`),
		regexp.MustCompile(`(?m)^order-1\s+shop\.order\s+completed\s+\d+\s+2026-01-05T09:\d\d:\d\d\.\d{3}Z\s*$`),
		regexp.MustCompile(`(?m)^order-1-what-if\s+shop\.order\s+completed\s+\d+\s+\S+\s+fork of order-1 at #\d+ \(simulation\)$`),
		regexp.MustCompile(`(?m)^order-2\s+shop\.order\s+suspended\s+\d+\s+\S+\s+parked on approve$`),
		regexp.MustCompile(`(?m)^order-3\s+shop\.order\s+cancelled\s`),
		regexp.MustCompile(`(?m)^refund-1\s+shop\.refund\s+completed\s`),
	} {
		if !want.MatchString(out) {
			t.Errorf("ls: no line matching %s in\n%s", want, out)
		}
	}

	var page lsPage
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--status", "suspended", "--json", "--limit", "100"), &page)
	if len(page.Executions) != 1+len(bulkIDs) || page.Next != "" {
		t.Fatalf("--status suspended: %d executions, next %q", len(page.Executions), page.Next)
	}
	for _, r := range page.Executions {
		if r.Status != fold.StatusSuspended || r.SuspendedOn != gate {
			t.Fatalf("--status suspended listed %+v", r)
		}
	}
	decodeJSON(t, mustLoom(t, bin, "ls", "--store", fx.path, "--flow", flowRefund, "--json"), &page)
	if len(page.Executions) != 2 || page.Executions[0].ExecutionID != "refund-1" || page.Executions[0].Length == 0 {
		t.Fatalf("--flow %s: %+v", flowRefund, page.Executions)
	}

	// Paging: pages of 5 visit every execution once, in order.
	var seen []string
	after := ""
	for range 10 {
		args := []string{"ls", "--store", fx.path, "--json", "--limit", "5"}
		if after != "" {
			args = append(args, "--after", after)
		}
		page.Executions, page.Next = nil, ""
		decodeJSON(t, mustLoom(t, bin, args...), &page)
		for _, r := range page.Executions {
			seen = append(seen, r.ExecutionID)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	want := append(append([]string{}, bulkIDs...), "flaky-1", "order-1", "order-1-what-if", "order-2", "order-3", "refund-1", "refund-2")
	if !slices.Equal(seen, want) {
		t.Fatalf("paging visited %v, want %v", seen, want)
	}
	out = mustLoom(t, bin, "ls", "--store", fx.path, "--limit", "3")
	if !strings.Contains(out, "More: loom ls --after bulk-02") {
		t.Fatalf("ls --limit 3 does not say how to go on:\n%s", out)
	}

	_, errOut, _ := loomRun(t, bin, "ls", "--store", fx.path, "--json")
	if errOut != "" {
		t.Fatalf("progress on a stderr that is not a terminal: %q", errOut)
	}
	_, errOut, _ = loomRun(t, bin, "ls", "--store", fx.path, "--progress", "always", "--status", "completed")
	if !strings.Contains(errOut, "executions scanned") || !strings.Contains(errOut, "\r") {
		t.Fatalf("--progress always: %q", errOut)
	}
}

// TestLogs prints the log one line per event, or one envelope per line.
func TestLogs(t *testing.T) {
	bin, fx := setup(t)
	log := readLog(t, fx.path, "order-1")
	out := mustLoom(t, bin, "logs", "order-1", "--store", fx.path)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(log) {
		t.Fatalf("%d lines for %d events:\n%s", len(lines), len(log), out)
	}
	for _, want := range []string{
		"#0    2026-01-05T09:00:00.250Z  EXECUTION_STARTED    input {\"item\":\"rare-tea\",\"qty\":2}",
		`STEP_FAILED          check-stock failed on channel out-of-stock: {"backorderDays":3,"item":"rare-tea"}`,
		`DECISION_RECORDED    carrier = "dhl"`,
		"EXECUTION_SUSPENDED  parked on approve",
		`APPROVAL_GRANTED     {"user":"alice"} for approve`,
		`EXECUTION_RESUMED    approve {"approved":true}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs: missing %q in\n%s", want, out)
		}
	}
	out = mustLoom(t, bin, "logs", "order-1", "--store", fx.path, "--json", "--from", "2")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(log)-2 {
		t.Fatalf("--json --from 2: %d lines, want %d", len(lines), len(log)-2)
	}
	for i, l := range lines {
		e, err := event.Decode([]byte(l), event.Limits{})
		if err != nil {
			t.Fatalf("line %d is not an envelope: %v\n%s", i, err, l)
		}
		want, _ := event.Encode(log[i+2])
		if l != string(want) {
			t.Fatalf("line %d differs from the stored envelope:\n%s\n%s", i, l, want)
		}
		_ = e
	}
	out = mustLoom(t, bin, "logs", "order-1-what-if", "--store", fx.path)
	if !regexp.MustCompile(`__loom_fork__\s+fork of order-1 at #\d+ \[kernel`).MatchString(out) {
		t.Fatalf("the fork marker line:\n%s", out)
	}
}

// TestState checks the canonical state at every sequence against a fold of
// the log done here, and the summary's content.
func TestState(t *testing.T) {
	bin, fx := setup(t)
	log := readLog(t, fx.path, "order-1")
	for _, at := range []int{0, int(fx.parkAt), len(log) - 1} {
		out := mustLoom(t, bin, "state", "order-1", "--store", fx.path, "--json", "--at", fmt.Sprint(at))
		want, _ := fold.Encode(fold.Fold(log[:at+1]))
		if strings.TrimSuffix(out, "\n") != string(want) {
			t.Fatalf("state --json --at %d differs from the fold of the log:\n%s\n%s", at, out, want)
		}
	}
	latest := mustLoom(t, bin, "state", "order-1", "--store", fx.path, "--json")
	if want, _ := fold.Encode(fold.Fold(log)); strings.TrimSuffix(latest, "\n") != string(want) {
		t.Fatal("state --json without --at is not the latest state")
	}
	out := mustLoom(t, bin, "state", "order-1", "--store", fx.path)
	for _, want := range []string{
		"Execution  order-1 (shop.order)",
		fmt.Sprintf("Status     completed at #%d", len(log)-1),
		`Input      {"item":"rare-tea","qty":2}`,
		`Output     {"status":"charged","total":14,"carrier":"dhl","charge":"ch-14","backorder":true}`,
		`Approval   approve by {"user":"alice"}`,
		`Decision   carrier = "dhl"`,
		`check-stock  failed     1        typed error on out-of-stock: {"backorderDays":3,"item":"rare-tea"}`,
		"charge       completed  1        \"ch-14\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("state: missing %q in\n%s", want, out)
		}
	}
	out = mustLoom(t, bin, "state", "order-2", "--store", fx.path)
	if !strings.Contains(out, "Parked on  approve (since #") {
		t.Fatalf("state of a parked execution:\n%s", out)
	}
	out = mustLoom(t, bin, "state", "order-1-what-if", "--store", fx.path)
	if !strings.Contains(out, fmt.Sprintf("Fork of    order-1 at #%d (simulation)", fx.parkAt)) || !strings.Contains(out, `"status":"rejected"`) {
		t.Fatalf("state of the fork:\n%s", out)
	}
}

// TestDiff lists what changed between two sequences.
func TestDiff(t *testing.T) {
	bin, fx := setup(t)
	var d stateDiff
	decodeJSON(t, mustLoom(t, bin, "diff", "order-1", "--store", fx.path, "--from", fmt.Sprint(fx.parkAt), "--json"), &d)
	paths := func(cs []change) []string {
		var p []string
		for _, c := range cs {
			p = append(p, c.Path)
		}
		return p
	}
	for _, want := range []string{"/frames/charge", "/variables/_approvals", "/variables/_output", "/variables/_resumePayloads"} {
		if !slices.Contains(paths(d.Added), want) {
			t.Errorf("diff from the park: %s not added (added %v)", want, paths(d.Added))
		}
	}
	if !slices.Contains(paths(d.Removed), "/variables/_suspendedOn") {
		t.Errorf("diff from the park: _suspendedOn not removed (%v)", paths(d.Removed))
	}
	var status *edit
	for i := range d.Changed {
		if d.Changed[i].Path == "/status" {
			status = &d.Changed[i]
		}
	}
	if status == nil || status.From != "suspended" || status.To != "completed" {
		t.Fatalf("the status change: %+v", d.Changed)
	}
	out := mustLoom(t, bin, "diff", "order-1", "--store", fx.path, "--from", "0", "--to", "1")
	if !strings.HasPrefix(out, "diff order-1 #0 → #1:") || !strings.Contains(out, "+ /frames/quote:") || !strings.Contains(out, "~ /sequence: 0 → 1") {
		t.Fatalf("diff 0 → 1:\n%s", out)
	}
}

// TestReplayCheck: every stored snapshot matches the re-folded log; a
// doctored snapshot fails the check with exit 3, naming its sequence.
func TestReplayCheck(t *testing.T) {
	bin, fx := setup(t)
	path := copyStore(t, fx.path)
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := db.SnapshotStore().ListSequences(context.Background(), "order-1")
	if err != nil || len(seqs) < 3 {
		db.Close()
		t.Fatalf("the fixture should hold several snapshots of order-1: %v %v", seqs, err)
	}
	var rep replayReport
	decodeJSON(t, mustLoom(t, bin, "replay-check", "order-1", "--store", path, "--json"), &rep)
	if !rep.OK || len(rep.Snapshots) != len(seqs) || !strings.HasPrefix(rep.FinalDigest, "sha256:") {
		t.Fatalf("replay-check: %+v (snapshots at %v)", rep, seqs)
	}
	out := mustLoom(t, bin, "replay-check", "order-1", "--store", path)
	if strings.Count(out, "✓ snapshot #") != len(seqs) {
		t.Fatalf("replay-check text:\n%s", out)
	}

	// Doctor the middle snapshot: the state of an earlier sequence under a
	// later one's number.
	victim := seqs[len(seqs)/2]
	log := readLog(t, path, "order-1")
	wrong := fold.Fold(log[:victim+1])
	wrong.Status = fold.StatusFailed
	b, err := snapshot.Encode(wrong)
	if err != nil {
		t.Fatal(err)
	}
	err = db.SnapshotStore().Save(context.Background(), store.Snapshot{ExecutionID: "order-1", Sequence: victim, SchemaVersion: event.SchemaVersion, State: b})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	out, errOut, code := loomRun(t, bin, "replay-check", "order-1", "--store", path)
	if code != exitCheckFailed {
		t.Fatalf("replay-check of a doctored snapshot exited %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("✗ snapshot #%d: it differs at /status: the log folds to \"", victim)) ||
		!strings.Contains(errOut, fmt.Sprintf("#%d", victim)) {
		t.Fatalf("the mismatch is not named:\n%s\n%s", out, errOut)
	}
}

// TestKernelManifestAndCompat prints the manifest and gates versions.
func TestKernelManifestAndCompat(t *testing.T) {
	bin, _ := setup(t)
	var m spec.KernelManifest
	decodeJSON(t, mustLoom(t, bin, "kernel-manifest", "--json"), &m)
	want := spec.Manifest()
	if m.KernelABIVersion != want.KernelABIVersion || !slices.Equal(m.Syscalls, want.Syscalls) ||
		m.EventSchemaVersion != want.EventSchemaVersion || !slices.Equal(m.KnownEventTypes, want.KnownEventTypes) ||
		m.SPIs != want.SPIs || m.WireABIVersion != wire.Version {
		t.Fatalf("kernel-manifest --json: %+v", m)
	}
	out := mustLoom(t, bin, "kernel-manifest")
	if !strings.Contains(out, "kernelAbi ") || !strings.Contains(out, "wireAbi ") || !strings.Contains(out, want.EventSchemaVersion) {
		t.Fatalf("kernel-manifest:\n%s", out)
	}

	if out := mustLoom(t, bin, "compat", "--abi", "1.0.0", "--schema", "1.2.0", "--wire", "1.9.0", "--spi", "eventStoreSpi=1.5.0"); !strings.HasPrefix(out, "compatible") {
		t.Fatalf("compat of compatible versions:\n%s", out)
	}
	out, errOut, code := loomRun(t, bin, "compat", "--abi", "2.0.0", "--wire", "0.9.0", "--json")
	var res struct {
		Compatible bool            `json:"compatible"`
		Mismatches []spec.Mismatch `json:"mismatches"`
	}
	decodeJSON(t, out, &res)
	if code != exitCheckFailed || res.Compatible || len(res.Mismatches) != 2 || !strings.Contains(errOut, "incompatible") {
		t.Fatalf("compat of a major mismatch: exit %d %+v %s", code, res, errOut)
	}
	for _, tc := range [][]string{{"compat"}, {"compat", "--spi", "nonsense"}} {
		if _, _, code := loomRun(t, bin, tc...); code != exitUsage {
			t.Errorf("%v exited %d, want %d", tc, code, exitUsage)
		}
	}
}

// TestErrorsSayWhatToDo pins the exit statuses and the advice of refusals.
func TestErrorsSayWhatToDo(t *testing.T) {
	bin, fx := setup(t)
	notLoom := filepath.Join(t.TempDir(), "other.db")
	if err := os.WriteFile(notLoom, []byte("not a database at all, just text"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"ls"}, exitUsage, "--store is required"},
		{[]string{"ls", "--store", missing}, exitNotFound, "no store at " + missing},
		{[]string{"ls", "--store", withSchema(t, postgresDSN(t), "no_such_schema")}, exitNotFound, `no Loom store in schema "no_such_schema"`},
		{[]string{"ls", "--store", notLoom}, exitUsage, "not a SQLite file Loom can read"},
		{[]string{"ls", "--store", fx.path, "--status", "asleep"}, exitUsage, `--status "asleep" is not a status`},
		{[]string{"state", "order-9", "--store", fx.path}, exitNotFound, `no execution "order-9" in ` + fx.path + ": list them with loom ls"},
		{[]string{"state", "order-1", "--store", fx.path, "--at", "999"}, exitNotFound, "order-1 has no event #999: its log ends at #"},
		{[]string{"diff", "order-1", "--store", fx.path}, exitUsage, "--from is required"},
		{[]string{"logs", "order-9", "--store", fx.path}, exitNotFound, `no execution "order-9"`},
		{[]string{"replay-check", "order-9", "--store", fx.path}, exitNotFound, `no execution "order-9"`},
		{[]string{"state", "--store", fx.path}, exitUsage, "want <id>, got 0 argument(s)"},
		{[]string{"state", "a", "b", "--store", fx.path}, exitUsage, "want <id>"},
		{[]string{"bogus"}, exitUsage, `unknown command "bogus"`},
		{[]string{"ls", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{[]string{"ls", "--progress", "sometimes"}, exitUsage, "--progress is auto, always or never"},
	} {
		out, errOut, code := loomRun(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("loom %v: exit %d, stderr %q (stdout %q); want exit %d saying %q", tc.args, code, errOut, out, tc.code, tc.says)
		}
	}
	if out := mustLoom(t, bin, "--help"); !strings.Contains(out, "Exit status: 0 success, 1 failure, 2 usage, 3 check failed") {
		t.Fatalf("--help does not document the exit statuses:\n%s", out)
	}
	// The store was only read: the fixture's file is unchanged by every
	// command above (its size and its logs).
	if got := readLog(t, fx.path, "order-1"); len(got) == 0 {
		t.Fatal("the fixture lost order-1")
	}
}

func decodeJSON(t *testing.T, s string, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(into); err != nil {
		t.Fatalf("not the expected JSON: %v\n%s", err, s)
	}
}
