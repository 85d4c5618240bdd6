package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/agent"
)

// TestHarnessReportsEveryField runs the whole harness in-process with tiny
// durations and sizes and checks the document it prints: one well-formed
// JSON value holding every field. It checks no timing: only shapes and the
// counts the runtime fixes (22 events per ten-step workflow, the log
// lengths of workload d, the turns and steps of workload e). Workload d
// itself fails the run should a warm resume replay or a cold one not, so a
// pass also means both paths ran; workload e fails it should a replay ask
// the model, and the report says it asked it zero times.
func TestHarnessReportsEveryField(t *testing.T) {
	doc := runHarness(t, "-duration", "200ms", "-db-dir", t.TempDir(),
		"-resume-small", "100", "-resume-large", "1000", "-resume-reps", "2",
		"-agent-small", "2", "-agent-large", "4", "-agent-reps", "1")
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
	for _, path := range []string{"machine.goos", "machine.goarch", "machine.go", "config.synchronous",
		"workloads.a.baseline", "workloads.b.baseline", "workloads.c.baseline", "workloads.d.comparison"} {
		if s, ok := lookup(t, doc, path).(string); !ok || s == "" {
			t.Errorf("%s = %v, want a non-empty string", path, lookup(t, doc, path))
		}
	}
	numbers = append(numbers, agentNumbers()...)
	for _, path := range numbers {
		if _, ok := lookup(t, doc, path).(json.Number); !ok {
			t.Errorf("%s = %v, want a number", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"workloads.e.description", "workloads.e.baseline", "workloads.e.comparison",
		"workloads.e.bytes.comparison", "workloads.e.bytes.full.toolLog", "workloads.e.bytes.lean.toolLog"} {
		if s, ok := lookup(t, doc, path).(string); !ok || s == "" {
			t.Errorf("%s = %v, want a non-empty string", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"workloads.a.met", "workloads.b.met", "workloads.c.met", "workloads.d.met",
		"workloads.e.met", "workloads.e.bytes.met"} {
		if _, ok := lookup(t, doc, path).(bool); !ok {
			t.Errorf("%s = %v, want a bool", path, lookup(t, doc, path))
		}
	}
	for _, path := range []string{"raw.oneRowPerCommitSamples", "raw.hundredRowsPerTxSamples",
		"workloads.a.baselineSamples", "workloads.c.baselineSamples",
		"workloads.d.warmSmallSamplesMs", "workloads.d.warmLargeSamplesMs",
		"workloads.d.coldSmallSamplesMs", "workloads.d.coldLargeSamplesMs",
		"workloads.e.small.agentSamplesMsPerTurn", "workloads.e.small.providerSamplesMsPerCall",
		"workloads.e.small.baselineSamples", "workloads.e.large.baselineSamples",
		"workloads.e.large.agentSamplesMsPerTurn", "workloads.e.large.providerSamplesMsPerCall",
		"workloads.e.replay.full.liveSamplesMs", "workloads.e.replay.full.replaySamplesMs",
		"workloads.e.replay.lean.liveSamplesMs", "workloads.e.replay.lean.replaySamplesMs"} {
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
	checkAgentBytes(t, doc)
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
		// e: 2 and 4 tool turns, each answered, then an answer turn.
		"workloads.e.repetitions":     "1",
		"workloads.e.small.toolTurns": "2",
		"workloads.e.small.turns":     "3",
		"workloads.e.large.toolTurns": "4",
		"workloads.e.large.turns":     "5",
		"workloads.e.bytes.turns":     "5",
		"workloads.e.replay.turns":    "5",
		// The replays were served from the log: the model was not asked.
		"workloads.e.replay.providerRequests": "0",
		// One model step and, but for the answer turn, one tool step a turn.
		`workloads.e.bytes.full.byKind.STEP_COMPLETED model.events`: "5",
		`workloads.e.bytes.full.byKind.STEP_COMPLETED tool.events`:  "4",
		`workloads.e.bytes.lean.byKind.STEP_COMPLETED model.events`: "5",
		`workloads.e.bytes.lean.byKind.STEP_COMPLETED tool.events`:  "4",
	} {
		if got := lookup(t, doc, path); got != json.Number(want) {
			t.Errorf("%s = %v, want %s", path, got, want)
		}
	}
}

// checkAgentBytes checks the facts of workload e's bytes that no timing
// moves: a lean log is smaller than a full one, the tool answers about
// 2 KiB, and every turn records one agent.turn.
func checkAgentBytes(t *testing.T, doc map[string]any) {
	t.Helper()
	n := func(path string) int64 {
		num, _ := lookup(t, doc, path).(json.Number)
		v, err := num.Int64()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return v
	}
	if full, lean := n("workloads.e.bytes.full.logBytes"), n("workloads.e.bytes.lean.logBytes"); lean >= full || lean <= 0 {
		t.Errorf("log bytes: lean %d, full %d; want 0 < lean < full", lean, full)
	}
	if b := n("workloads.e.toolOutputBytes"); b < 1536 || b > 2560 {
		t.Errorf("toolOutputBytes = %d, want about 2 KiB", b)
	}
	for _, mode := range []string{"full", "lean"} {
		// The event type holds a dot, which lookup's paths cannot.
		byKind, _ := lookup(t, doc, "workloads.e.bytes."+mode+".byKind").(map[string]any)
		kind, _ := byKind[agent.TurnEvent].(map[string]any)
		if got := kind["events"]; got != json.Number("5") {
			t.Errorf("%s log: %v %s records, want 5", mode, got, agent.TurnEvent)
		}
		parts, _ := lookup(t, doc, "workloads.e.bytes."+mode+".stateParts").(map[string]any)
		sum := int64(0)
		for _, k := range []string{"frames model", "frames tool", "variables", "rest"} {
			num, _ := parts[k].(json.Number)
			v, err := num.Int64()
			if err != nil || v <= 0 {
				t.Errorf("%s state: part %q = %v, want a positive number", mode, k, parts[k])
			}
			sum += v
		}
		if want := n("workloads.e.bytes." + mode + ".stateBytes"); sum != want {
			t.Errorf("%s state: the parts sum to %d, want stateBytes %d", mode, sum, want)
		}
	}
}

// agentNumbers lists workload e's numeric fields.
func agentNumbers() []string {
	out := []string{"workloads.e.modelCallMs", "workloads.e.toolOutputBytes", "workloads.e.repetitions",
		"workloads.e.overheadMsPerTurn", "workloads.e.targetOverheadMs", "workloads.e.ratio", "workloads.e.target",
		"workloads.e.linearity.agentMsPerTurn", "workloads.e.linearity.providerMsPerCall",
		"workloads.e.linearity.kernelMsPerTurn", "workloads.e.linearity.overheadMsPerTurn",
		"workloads.e.bytes.toolTurns", "workloads.e.bytes.turns", "workloads.e.bytes.leanOverFull",
		"workloads.e.bytes.leanOverFullState", "workloads.e.bytes.ratio", "workloads.e.bytes.target",
		"workloads.e.replay.toolTurns", "workloads.e.replay.turns", "workloads.e.replay.repetitions",
		"workloads.e.replay.providerRequests"}
	for _, size := range []string{"small", "large"} {
		for _, f := range []string{"toolTurns", "turns", "agentMsPerTurn", "providerMsPerCall", "appendsPerTurn",
			"eventsPerTurn", "transactionsPerTurn", "rawCommitMs", "commitMsPerTurn", "overheadMsPerTurn",
			"overheadFractionOfModelCall", "agentOverProvider", "lastRequestBytes"} {
			out = append(out, "workloads.e."+size+"."+f)
		}
	}
	for _, mode := range []string{"full", "lean"} {
		for _, f := range []string{"events", "logBytes", "bytesPerTurn", "stateBytes", "stateBytesPerTurn"} {
			out = append(out, "workloads.e.bytes."+mode+"."+f)
		}
		for _, f := range []string{"liveMs", "replayMs", "ratio", "openMs"} {
			out = append(out, "workloads.e.replay."+mode+"."+f)
		}
	}
	return out
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

// number is the number at path in doc; anything else fails the test.
func number(t *testing.T, doc map[string]any, path string) float64 {
	t.Helper()
	n, ok := lookup(t, doc, path).(json.Number)
	if !ok {
		t.Fatalf("%s = %v, want a number", path, lookup(t, doc, path))
	}
	v, err := n.Float64()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
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
		{"-agent-small", "5", "-agent-large", "5"},
		{"-agent-small", "0"},
		{"-agent-large", "1000"},
		{"-agent-reps", "0"},
		{"-postgres", "postgres://x", "-workloads", "e"},
		{"-postgres", "postgres://x", "-agent-reps", "2"},
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
