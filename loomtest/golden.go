package loomtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// UpdateFlag is the test flag that makes Golden record instead of compare:
// go test ./... -run TestX -loomtest.update. It is registered by this
// package, so every test binary that imports loomtest accepts it.
const UpdateFlag = "loomtest.update"

var update = flag.Bool(UpdateFlag, false,
	"loomtest: rewrite the golden logs (testdata/*.golden.jsonl) from today's code; only when the change to the logs is intended")

// GoldenSuffix ends the name of every golden file.
const GoldenSuffix = ".golden.jsonl"

// Golden checks execution id's durable log against the golden file
// <dir>/<name>.golden.jsonl (dir is "testdata" unless WithGoldenDir): with
// -loomtest.update it records the log there instead (leaving a file the
// log matches untouched). The file holds one canonical JSON object per
// event: its sequence, eventType, workflowId, payload and metadata. What
// differs between two runs of the same code is left out or masked: the
// envelope id, executionId and timestamp; the choice of a recorded
// loom.Random seed; the "trace" metadata an Observer adds. A recorded
// loom.Now, a wakeAt and the like are the Env's Clock readings, which
// start at Epoch and move only with the test, so they are compared. Events that
// Parallel branches wrote (a branch step's STEP_STARTED and that step's
// later STEP_RETRYING, STEP_COMPLETED, STEP_FAILED) may come in another
// order within a run of such events, as goroutines allow.
//
// A mismatch, a missing file or an unreadable one fails t (without
// stopping it) with the first differing sequence, the field that differs
// and both events.
func (e *Env) Golden(t testing.TB, id, name string) {
	t.Helper()
	if name == "" || !filepath.IsLocal(name) {
		t.Fatalf("loomtest: golden name %q must be a non-empty local path", name)
	}
	checkGolden(t, filepath.Join(e.opts.goldenDir, name+GoldenSuffix), e.Log(t, id), *update)
}

// checkGolden records log at path (record) or compares it with the file.
func checkGolden(t testing.TB, path string, log []event.Envelope, record bool) {
	t.Helper()
	got, err := goldenLines(log)
	if err != nil {
		t.Fatalf("loomtest: golden %s: %v", path, err)
	}
	data, readErr := os.ReadFile(path)
	if record {
		if readErr == nil {
			if want, err := parseGolden(data); err == nil && goldenDiff(want, got) == "" {
				return
			}
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("loomtest: golden %s: %v", path, err)
		}
		if err := os.WriteFile(path, encodeGolden(got), 0o644); err != nil {
			t.Fatalf("loomtest: golden %s: %v", path, err)
		}
		t.Logf("loomtest: wrote %s (%d events)", path, len(got))
		return
	}
	hint := fmt.Sprintf("(if the change is intended, record it again: go test -run '%s' -%s)", t.Name(), UpdateFlag)
	if errors.Is(readErr, os.ErrNotExist) {
		t.Errorf("loomtest: golden %s does not exist %s", path, hint)
		return
	}
	if readErr != nil {
		t.Errorf("loomtest: golden %s: %v", path, readErr)
		return
	}
	want, err := parseGolden(data)
	if err != nil {
		t.Errorf("loomtest: golden %s: %v %s", path, err, hint)
		return
	}
	if msg := goldenDiff(want, got); msg != "" {
		t.Errorf("loomtest: the log differs from golden %s: %s\n%s", path, msg, hint)
	}
}

// goldenLine is one event as a golden file holds it: its members, and the
// canonical JSON of the whole.
type goldenLine struct {
	fields map[string]json.RawMessage
	raw    []byte
}

// goldenFields are the members of a golden line, in the order a diff
// looks at them.
var goldenFields = []string{"sequence", "eventType", "workflowId", "payload", "metadata"}

// randomDecision is the prefix of the decision ids loom.Random records.
const randomDecision = "__loom_random"

// goldenLines renders a log as golden lines, masking what differs between
// runs.
func goldenLines(log []event.Envelope) ([]goldenLine, error) {
	out := make([]goldenLine, 0, len(log))
	for _, ev := range log {
		payload := ev.PayloadOrNull()
		if ev.Type == event.DecisionRecorded {
			payload = maskRandom(payload)
		}
		m := map[string]json.RawMessage{"sequence": mustJSON(ev.Sequence), "eventType": mustJSON(ev.Type),
			"workflowId": mustJSON(ev.WorkflowID), "payload": payload}
		if meta := withoutTrace(ev.Metadata); len(meta) > 0 {
			m["metadata"] = mustJSON(meta)
		}
		l, err := newGoldenLine(m)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", ev.Sequence, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// withoutTrace drops the "trace" metadata member, which names a span of this run.
func withoutTrace(meta map[string]json.RawMessage) map[string]json.RawMessage {
	if _, ok := meta["trace"]; !ok {
		return meta
	}
	out := make(map[string]json.RawMessage, len(meta))
	for k, v := range meta { //loom:order-independent map into map
		if k != "trace" {
			out[k] = v
		}
	}
	return out
}

// maskRandom replaces the choice of a loom.Random seed decision, which
// crypto/rand drew.
func maskRandom(payload json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	var id string
	if json.Unmarshal(payload, &p) != nil || json.Unmarshal(p["decisionId"], &id) != nil ||
		!strings.HasPrefix(id, randomDecision) {
		return payload
	}
	p["choice"] = mustJSON("<random seed>")
	return mustJSON(p)
}

func newGoldenLine(m map[string]json.RawMessage) (goldenLine, error) {
	b, err := json.Marshal(m)
	if err == nil {
		b, err = event.Canonical(b)
	}
	if err != nil {
		return goldenLine{}, err
	}
	return goldenLine{fields: m, raw: b}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("loomtest: encoding a value of its own: " + err.Error())
	}
	return b
}

func encodeGolden(lines []goldenLine) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l.raw)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseGolden reads a golden file back.
func parseGolden(data []byte) ([]goldenLine, error) {
	var out []goldenLine
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(data) == 0 {
			break
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		l, err := newGoldenLine(m)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// goldenDiff describes the first difference between the recorded lines
// and the current ones ("" when there is none), allowing Parallel
// branches' interleaving (see Golden).
func goldenDiff(want, got []goldenLine) string {
	wm, gm := branchMarks(want), branchMarks(got)
	for i := 0; i < max(len(want), len(got)); i++ {
		if i >= len(want) || i >= len(got) {
			return describeDiff(i, want, got)
		}
		if bytes.Equal(want[i].raw, got[i].raw) {
			continue
		}
		if !wm[i] || !gm[i] {
			return describeDiff(i, want, got)
		}
		start, end := i, i
		for start > 0 && wm[start-1] && gm[start-1] {
			start--
		}
		for end < len(want) && end < len(got) && wm[end] && gm[end] {
			end++
		}
		if !slices.Equal(unordered(want[start:end]), unordered(got[start:end])) {
			return fmt.Sprintf("the events Parallel branches wrote at sequences %d–%d differ in more than their order; %s",
				start, end-1, describeDiff(i, want, got))
		}
		i = end - 1
	}
	return ""
}

// unordered is a run of lines without their sequences, sorted.
func unordered(lines []goldenLine) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		m := make(map[string]json.RawMessage, len(l.fields))
		for k, v := range l.fields { //loom:order-independent map into map
			if k != "sequence" {
				m[k] = v
			}
		}
		c, _ := event.Canonical(mustJSON(m))
		out[i] = string(c)
	}
	sort.Strings(out)
	return out
}

// describeDiff names the first differing field of line i and shows both.
func describeDiff(i int, want, got []goldenLine) string {
	show := func(lines []goldenLine) string {
		if i < len(lines) {
			return string(lines[i].raw)
		}
		return "(no event)"
	}
	var what string
	switch {
	case i >= len(want):
		what = fmt.Sprintf("the log has %d events, the golden %d: an event was added", len(got), len(want))
	case i >= len(got):
		what = fmt.Sprintf("the log has %d events, the golden %d: an event is missing", len(got), len(want))
	default:
		for _, f := range goldenFields {
			if path, w, g, ok := firstDiff(f, want[i].fields[f], got[i].fields[f]); ok {
				what = fmt.Sprintf("field %s: golden %s, now %s", path, w, g)
				break
			}
		}
	}
	return fmt.Sprintf("first difference at sequence %d, %s\n  golden: %s\n  now:    %s", i, what, show(want), show(got))
}

// firstDiff finds the first path under which two JSON values differ,
// descending into objects (keys in order) and arrays; absent is "(none)".
func firstDiff(path string, a, b json.RawMessage) (string, string, string, bool) {
	ca, cb := canonicalOrRaw(a), canonicalOrRaw(b)
	if ca == cb {
		return "", "", "", false
	}
	var oa, ob map[string]json.RawMessage
	if json.Unmarshal(a, &oa) == nil && json.Unmarshal(b, &ob) == nil && oa != nil && ob != nil {
		keys := map[string]bool{}
		for k := range oa { //loom:sorted below
			keys[k] = true
		}
		for k := range ob { //loom:sorted below
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys { //loom:sorted below
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if p, x, y, ok := firstDiff(path+"."+k, oa[k], ob[k]); ok {
				return p, x, y, true
			}
		}
	}
	var la, lb []json.RawMessage
	if json.Unmarshal(a, &la) == nil && json.Unmarshal(b, &lb) == nil && la != nil && lb != nil {
		for j := range min(len(la), len(lb)) {
			if p, x, y, ok := firstDiff(fmt.Sprintf("%s[%d]", path, j), la[j], lb[j]); ok {
				return p, x, y, true
			}
		}
	}
	return path, clip([]byte(ca)), clip([]byte(cb)), true
}

func canonicalOrRaw(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	if c, err := event.Canonical(raw); err == nil {
		return string(c)
	}
	return string(raw)
}

// branchMarks marks the lines that Parallel branches wrote.
func branchMarks(lines []goldenLine) []bool {
	marks := make([]bool, len(lines))
	inBranch := map[string]bool{}
	for i, l := range lines {
		var typ string
		_ = json.Unmarshal(l.fields["eventType"], &typ)
		var p struct {
			StepID string `json:"stepId"`
			Branch string `json:"branch"`
		}
		_ = json.Unmarshal(l.fields["payload"], &p)
		switch typ {
		case event.StepStarted:
			inBranch[p.StepID] = p.Branch != ""
			marks[i] = p.Branch != ""
		case event.StepRetrying, event.StepCompleted, event.StepFailed:
			marks[i] = inBranch[p.StepID]
		}
	}
	return marks
}
