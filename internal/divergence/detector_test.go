package divergence

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
)

// logged folds a log whose steps were created in the order of ids.
func logged(ids ...string) fold.State {
	evs := []event.Envelope{{ID: "e0", ExecutionID: "ex", Type: event.ExecutionStarted, Payload: json.RawMessage(`{"input":null}`)}}
	for _, id := range ids {
		seq := int64(len(evs))
		evs = append(evs,
			event.Envelope{ID: "e" + strconv.FormatInt(seq, 10), ExecutionID: "ex", Type: event.StepStarted, Sequence: seq,
				Payload: json.RawMessage(`{"stepId":` + strconv.Quote(id) + `}`)},
			event.Envelope{ID: "e" + strconv.FormatInt(seq+1, 10), ExecutionID: "ex", Type: event.StepCompleted, Sequence: seq + 1,
				Payload: json.RawMessage(`{"stepId":` + strconv.Quote(id) + `,"output":1}`)})
	}
	return fold.Fold(evs)
}

// issue is one thing a re-run does: a root step, or a finished Parallel
// block (set).
type issue struct {
	root  string
	block []string
}

func root(id string) issue      { return issue{root: id} }
func block(ids ...string) issue { return issue{block: ids} }
func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestADR0113_Detector(t *testing.T) {
	cases := []struct {
		name string
		log  []string
		run  []issue
		// want is the first divergence's description (a substring), "" for
		// none; at is the index of the issue that reports it.
		want string
		at   int
	}{
		{"strict order outside Parallel", []string{"a", "b", "c"}, []issue{root("a"), root("b"), root("c")}, "", 0},
		{"a renamed step", []string{"a", "b", "c"}, []issue{root("a"), root("b2"), root("c")},
			`step "b2" issued where the log has "b"`, 1},
		{"a reordered step", []string{"a", "b", "c"}, []issue{root("a"), root("c"), root("b")},
			`step "c" issued where the log has "b"`, 1},
		{"a skipped step", []string{"a", "b", "c"}, []issue{root("a"), root("c")},
			`step "c" issued where the log has "b"`, 1},
		{"a Parallel block matched as a set", []string{"a", "b", "c", "d"}, []issue{root("a"), block("c", "b"), root("d")}, "", 0},
		{"a Parallel block that skipped a step", []string{"a", "b", "c", "d"}, []issue{root("a"), block("b", "d")},
			`the log's step "c" was not issued by the re-run`, 1},
		{"a Parallel block with new work", []string{"a", "b"}, []issue{root("a"), block("b", "new"), root("after")}, "", 0},
		{"a Parallel block that issued nothing logged", []string{"a", "b"}, []issue{root("a"), block("x", "y"), root("b")}, "", 0},
		{"past the prefix: new work", []string{"a"}, []issue{root("a"), root("z"), root("y")}, "", 0},
		{"a reused id is served its first outcome", []string{"a", "b"}, []issue{root("a"), root("a"), root("b"), root("a")}, "", 0},
		{"a reused id after a block", []string{"a", "b", "c"}, []issue{block("a", "b"), root("b"), root("c")}, "", 0},
		{"an empty log", nil, []issue{root("a"), block("b")}, "", 0},
		{"the first step diverges", []string{"a"}, []issue{root("b")}, `step "b" issued where the log has "a"`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := New(logged(c.log...))
			first, at := "", -1
			for i, is := range c.run {
				var msg string
				if is.block != nil {
					msg = d.BlockSteps(set(is.block))
				} else {
					msg = d.RootStep(is.root)
				}
				if d.Report(msg) {
					first, at = msg, i
				}
			}
			switch {
			case c.want == "" && first != "":
				t.Fatalf("diverged at %d: %s", at, first)
			case c.want != "" && (!strings.Contains(first, c.want) || at != c.at):
				t.Fatalf("first divergence %q at %d, want %q at %d", first, at, c.want, c.at)
			}
		})
	}
}

// TestADR0113_ADivergingStepStaysExpected: a divergence matches nothing, so
// the log's step is still the next expected one, and only the first
// divergence is to be reported.
func TestADR0113_ADivergingStepStaysExpected(t *testing.T) {
	d := New(logged("a", "b"))
	if msg := d.RootStep("x"); msg == "" || !d.Report(msg) {
		t.Fatalf("no divergence: %q", msg)
	}
	if msg := d.RootStep("y"); msg == "" || d.Report(msg) {
		t.Fatalf("second divergence %q reported again", msg)
	}
	if msg := d.RootStep("a"); msg != "" {
		t.Fatal(msg)
	}
	if d.Report("") {
		t.Fatal("an empty message was reported")
	}
}

// TestADR0113_OrderIsTotal: frames with equal creating sequences (a
// hand-built or foreign state) still yield one order, the step ids'.
func TestADR0113_OrderIsTotal(t *testing.T) {
	s := fold.Initial()
	s.Frames = map[string]fold.Frame{"b": {StepID: "b", Seq: 3}, "a": {StepID: "a", Seq: 3}, "c": {StepID: "c", Seq: 1}}
	for range 20 {
		d := New(s)
		for _, id := range []string{"c", "a", "b"} {
			if msg := d.RootStep(id); msg != "" {
				t.Fatal(msg)
			}
		}
	}
}
