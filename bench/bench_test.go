package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestHarnessReportsEveryField runs the whole harness in-process with tiny
// durations and sizes and checks the document it prints: one well-formed
// JSON value holding every field. It checks no timing: only shapes and the
// counts the runtime fixes (22 events per ten-step workflow, the log
// lengths of workload d). Workload d itself fails the run should a warm
// resume replay or a cold one not, so a pass also means both paths ran.
func TestHarnessReportsEveryField(t *testing.T) {
	doc := runHarness(t, "-duration", "200ms", "-db-dir", t.TempDir(),
		"-resume-small", "100", "-resume-large", "1000", "-resume-reps", "2")
	if s := lookup(t, doc, "config.store"); s != "sqlite" {
		t.Errorf("config.store = %v, want sqlite", s)
	}

	numbers := []string{
		"machine.cpus",
		"raw.oneRowPerCommitPerSec", "raw.hundredRowsPerTxPerSec", "raw.payloadBytes",
		"workloads.d.smallEvents", "workloads.d.largeEvents", "workloads.d.smallSteps", "workloads.d.largeSteps",
		"workloads.d.repetitions",
		"workloads.d.smallSnapshotBytes", "workloads.d.largeSnapshotBytes",
		"workloads.d.smallSnapshotJSONBytes", "workloads.d.largeSnapshotJSONBytes",
		"workloads.d.largeBuildSec", "workloads.d.largeSettleSec",
		"workloads.d.warmSmallMs", "workloads.d.warmLargeMs", "workloads.d.warmRatio",
		"workloads.d.warmSmallResumeCallMs", "workloads.d.warmLargeResumeCallMs",
		"workloads.d.coldSmallMs", "workloads.d.coldLargeMs", "workloads.d.coldRatio",
		"workloads.d.coldSmallResumeCallMs", "workloads.d.coldLargeResumeCallMs",
		"workloads.d.coldSmallOpenMs", "workloads.d.coldLargeOpenMs",
		"workloads.d.ratio", "workloads.d.target",
	}
	for _, w := range []string{"a", "b", "c"} {
		for _, f := range []string{"workers", "workflows", "workflowsPerSec", "eventsPerSec", "eventsPerWorkflow",
			"appendsPerWorkflow", "transactionsPerWorkflow", "p50Ms", "p99Ms", "baselineValue", "ratio", "target"} {
			numbers = append(numbers, "workloads."+w+"."+f)
		}
	}
	for _, path := range numbers {
		if _, ok := lookup(t, doc, path).(json.Number); !ok {
			t.Errorf("%s = %v, want a number", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"machine.goos", "machine.goarch", "machine.go", "config.synchronous",
		"workloads.a.baseline", "workloads.b.baseline", "workloads.c.baseline", "workloads.d.comparison"} {
		if s, ok := lookup(t, doc, path).(string); !ok || s == "" {
			t.Errorf("%s = %v, want a non-empty string", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"workloads.a.met", "workloads.b.met", "workloads.c.met", "workloads.d.met"} {
		if _, ok := lookup(t, doc, path).(bool); !ok {
			t.Errorf("%s = %v, want a bool", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"raw.oneRowPerCommitSamples", "raw.hundredRowsPerTxSamples",
		"workloads.a.baselineSamples", "workloads.c.baselineSamples",
		"workloads.d.warmSmallSamplesMs", "workloads.d.warmLargeSamplesMs",
		"workloads.d.coldSmallSamplesMs", "workloads.d.coldLargeSamplesMs"} {
		if l, ok := lookup(t, doc, path).([]any); !ok || len(l) == 0 {
			t.Errorf("%s = %v, want a non-empty list", path, lookup(t, doc, path))
		}
	}
	// The cold path has no target: the field is there, and null.
	if v := lookup(t, doc, "workloads.d.coldTarget"); v != nil {
		t.Errorf("workloads.d.coldTarget = %v, want null", v)
	}
	// ratio, target and met judge the warm path.
	if r, w := lookup(t, doc, "workloads.d.ratio"), lookup(t, doc, "workloads.d.warmRatio"); r != w {
		t.Errorf("workloads.d.ratio = %v, want warmRatio %v", r, w)
	}

	// Counts the runtime fixes, not timings.
	for path, want := range map[string]string{
		"workloads.a.eventsPerWorkflow": "22", // started, 10 × (started, completed), completed
		"workloads.b.eventsPerWorkflow": "22",
		"workloads.c.eventsPerWorkflow": "22",
		"workloads.c.workers":           "32",
		"workloads.d.smallEvents":       "102", // started, 50 × 2, suspended
		"workloads.d.largeEvents":       "1002",
		"workloads.d.smallSteps":        "50",
		"workloads.d.largeSteps":        "500",
		"workloads.d.repetitions":       "2",
	} {
		if got := lookup(t, doc, path); got != json.Number(want) {
			t.Errorf("%s = %v, want %s", path, got, want)
		}
	}
}

// runHarness runs the harness in-process with args and returns the one
// JSON document it printed.
func runHarness(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out, progress bytes.Buffer
	if err := run(context.Background(), args, &out, &progress); err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	dec := json.NewDecoder(&out)
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("stdout holds more than one JSON document (next: %v)", err)
	}
	return doc
}

// lookup follows a dotted path through decoded JSON objects; a missing
// key fails the test.
func lookup(t *testing.T, doc map[string]any, path string) any {
	t.Helper()
	var v any = doc
	for _, k := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", path, v)
		}
		if v, ok = obj[k]; !ok {
			t.Fatalf("%s: no field %q", path, k)
		}
	}
	return v
}

// TestFlagsRefused checks that a bad command line is refused before
// anything is measured.
func TestFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-sync", "off"},
		{"-workloads", "a,x"},
		{"-workloads", ""},
		{"-duration", "0s"},
		{"-resume-small", "100", "-resume-large", "100"},
		{"-resume-reps", "0"},
		{"extra"},
		{"-postgres", "postgres://x", "-workloads", "a,d"},
		{"-postgres", "postgres://x", "-sync", "full"},
		{"-postgres", "postgres://x", "-db-dir", "/tmp"},
		{"-postgres", "postgres://x", "-resume-reps", "2"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	f, err := parseFlags([]string{"-workloads", "d, b,d", "-sync", "normal"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "b,d" || f.sync.String() != "NORMAL" {
		t.Fatalf("workloads %v, sync %v", f.workloads, f.sync)
	}
	// -postgres runs what PostgreSQL can by default.
	if f, err = parseFlags([]string{"-postgres", "postgres://x"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "a,b,c" {
		t.Fatalf("-postgres: workloads %v, want a,b,c", f.workloads)
	}
}
