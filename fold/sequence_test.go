package fold

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// TestFoldCheckedRefusesSequenceGaps (STYLE 15, contiguous sequences): a log
// folds only when each sequence is the one after the last folded.
func TestFoldCheckedRefusesSequenceGaps(t *testing.T) {
	l := newLog().started().
		add(event.StepStarted, `{"stepId":"a","input":1}`).
		add(event.StepCompleted, `{"stepId":"a","output":2}`).
		add(event.DecisionRecorded, `{"decisionId":"d","choice":1}`).
		add(event.ExecutionSuspended, `{"on":"approve"}`).
		add(event.ExecutionResumed, `{"eventType":"approve","payload":true}`)
	all := l.evs
	pick := func(seqs ...int) []event.Envelope {
		out := make([]event.Envelope, len(seqs))
		for i, s := range seqs {
			out[i] = all[s]
		}
		return out
	}
	snapshot := Fold(all[:3]) // Sequence 2
	for _, c := range []struct {
		name string
		base State
		evs  []event.Envelope
		gap  *SequenceGapError // nil: folds
	}{
		{"a whole log", Initial(), all, nil},
		{"an empty log", Initial(), nil, nil},
		{"a snapshot and its tail", snapshot, pick(3, 4, 5), nil},
		{"a snapshot and no tail", snapshot, nil, nil},
		{"a log missing its first event", Initial(), pick(1, 2), &SequenceGapError{"ex-1", 0, 1}},
		{"a lost event", Initial(), pick(0, 1, 3, 4), &SequenceGapError{"ex-1", 2, 3}},
		{"a repeated event", Initial(), pick(0, 1, 1, 2), &SequenceGapError{"ex-1", 2, 1}},
		{"events out of order", Initial(), pick(0, 2, 1), &SequenceGapError{"ex-1", 1, 2}},
		{"a tail overlapping its snapshot", snapshot, pick(2, 3), &SequenceGapError{"ex-1", 3, 2}},
		{"a tail that skips", snapshot, pick(4, 5), &SequenceGapError{"ex-1", 3, 4}},
		{"the zero State is not Initial", State{}, all, &SequenceGapError{"ex-1", 1, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := mustEncode(t, c.base)
			got, err := FoldChecked(c.base, c.evs)
			if mustEncode(t, c.base) != before {
				t.Fatal("FoldChecked modified its base")
			}
			if c.gap == nil {
				if err != nil {
					t.Fatal(err)
				}
				if mustEncode(t, got) != mustEncode(t, FoldFrom(c.base, c.evs)) {
					t.Fatal("FoldChecked and FoldFrom disagree on a contiguous log")
				}
				return
			}
			var gap *SequenceGapError
			if !errors.As(err, &gap) || *gap != *c.gap {
				t.Fatalf("err = %v, want %+v", err, c.gap)
			}
			if !reflect.DeepEqual(got, State{}) {
				t.Fatalf("a refused log returned %+v, want the zero State", got)
			}
			msg := err.Error()
			for _, part := range []string{`"ex-1"`, "corrupt", "out of order"} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not say %s", msg, part)
				}
			}
		})
	}
	if got, _ := FoldChecked(Initial(), all); mustEncode(t, got) != mustEncode(t, Fold(all)) {
		t.Fatal("FoldChecked of a whole log differs from Fold")
	}
}

func TestApplyCheckedFoldsNothingAtAGap(t *testing.T) {
	l := newLog().started().add(event.StepStarted, `{"stepId":"a"}`).add(event.StepCompleted, `{"stepId":"a","output":1}`)
	f := NewFolder(Initial())
	if err := f.ApplyChecked(l.evs[0]); err != nil {
		t.Fatal(err)
	}
	before := mustEncode(t, *f.Peek())
	var gap *SequenceGapError
	if err := f.ApplyChecked(l.evs[2]); !errors.As(err, &gap) || gap.Want != 1 || gap.Got != 2 {
		t.Fatalf("err = %v, want a gap at 1", err)
	}
	if mustEncode(t, *f.Peek()) != before {
		t.Fatal("a refused event changed the Folder")
	}
	for _, e := range l.evs[1:] {
		if err := f.ApplyChecked(e); err != nil {
			t.Fatal(err)
		}
	}
	if mustEncode(t, f.State()) != mustEncode(t, l.fold()) {
		t.Fatal("ApplyChecked and Fold disagree")
	}
}
