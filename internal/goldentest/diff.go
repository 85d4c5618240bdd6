package goldentest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/loom-kernel/loom/event"
)

// Diff compares a replayed log with a recorded one (canonical envelopes, as
// History.Raw holds them), envelope by envelope in canonical JSON, and
// describes the first difference ("" when there is none). One relaxation,
// because Parallel branches run as goroutines: within a run of consecutive
// branch events (a STEP_STARTED with a branch, and that step's later
// STEP_RETRYING, STEP_COMPLETED and STEP_FAILED), the events may come in
// another order, as long as every position keeps its id, sequence and
// timestamp and the run holds the same events (type, payload, metadata)
// byte for byte. Everything else, the events after the block included, is
// strict.
//
// It also counts the blocks that matched only in another interleaving.
func Diff(recorded [][]byte, replayed []event.Envelope) (string, int) {
	reordered := 0
	got := make([][]byte, len(replayed))
	for i, e := range replayed {
		c, err := Canonical(e)
		if err != nil {
			return fmt.Sprintf("replayed event %d: %v", i, err), 0
		}
		got[i] = c
	}
	want := make([]event.Envelope, len(recorded))
	for i, raw := range recorded {
		want[i], _ = event.Decode(raw, event.Limits{}) // checked by Load
	}
	wm, gm := branchMarks(want), branchMarks(replayed)
	for i := 0; i < max(len(recorded), len(got)); i++ {
		if i >= len(recorded) || i >= len(got) {
			return describeDiff(i, recorded, got), 0
		}
		if bytes.Equal(recorded[i], got[i]) {
			continue
		}
		if !wm[i] || !gm[i] {
			return describeDiff(i, recorded, got), 0
		}
		end := i
		for end < len(want) && wm[end] && end < len(gm) && gm[end] {
			end++
		}
		start := i
		for start > 0 && wm[start-1] && gm[start-1] {
			start--
		}
		if msg := sameBlock(want[start:end], replayed[start:end]); msg != "" {
			return fmt.Sprintf("the Parallel block #%d–#%d: %s\n%s", start, end-1, msg, describeDiff(i, recorded, got)), 0
		}
		reordered++
		i = end - 1
	}
	return "", reordered
}

func describeDiff(i int, recorded, got [][]byte) string {
	line := func(evs [][]byte) string {
		if i < len(evs) {
			return string(evs[i])
		}
		return "(none)"
	}
	return fmt.Sprintf("first difference at sequence %d (recorded %d events, replayed %d):\n  recorded: %s\n  replayed: %s",
		i, len(recorded), len(got), line(recorded), line(got))
}

// branchMarks marks the events of a log that Parallel branches wrote.
func branchMarks(evs []event.Envelope) []bool {
	marks := make([]bool, len(evs))
	inBranch := map[string]bool{}
	for i, e := range evs {
		var p struct {
			StepID string `json:"stepId"`
			Branch string `json:"branch"`
		}
		_ = json.Unmarshal(e.PayloadOrNull(), &p)
		switch e.Type {
		case event.StepStarted:
			inBranch[p.StepID] = p.Branch != ""
			marks[i] = p.Branch != ""
		case event.StepRetrying, event.StepCompleted, event.StepFailed:
			marks[i] = inBranch[p.StepID]
		}
	}
	return marks
}

// sameBlock compares two runs of branch events as the relaxation allows.
func sameBlock(want, got []event.Envelope) string {
	split := func(evs []event.Envelope) (frames, contents []string) {
		for _, e := range evs {
			f, _ := Canonical(event.Envelope{ID: e.ID, WorkflowID: e.WorkflowID, ExecutionID: e.ExecutionID,
				Sequence: e.Sequence, Timestamp: e.Timestamp, Type: "-"})
			c := event.MustCanonical(mustJSON(map[string]any{"eventType": e.Type, "payload": e.PayloadOrNull(), "metadata": e.Metadata}))
			frames, contents = append(frames, string(f)), append(contents, string(c))
		}
		sort.Strings(contents)
		return frames, contents
	}
	wf, wc := split(want)
	gf, gc := split(got)
	if !slices.Equal(wf, gf) {
		return "ids, sequences or timestamps differ"
	}
	if !slices.Equal(wc, gc) {
		return "the branches recorded other events"
	}
	return ""
}
