package store_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

func envelope(seq int64, typ, payload string, kernel bool) event.Envelope {
	e := event.Envelope{ID: "e", ExecutionID: "x", WorkflowID: "wf", Type: typ, Sequence: seq,
		Timestamp: 100 + seq, Payload: json.RawMessage(payload)}
	if kernel {
		e.Metadata = map[string]json.RawMessage{"kernel": json.RawMessage(`true`)}
	}
	return e
}

func TestEventStatus(t *testing.T) {
	set := func(s store.UnfinishedStatus, next string) store.StatusChange {
		return store.StatusChange{Move: store.StatusSet, Status: s, Sequence: 3, Timestamp: 103, Next: next}
	}
	ended, kept := store.StatusChange{Move: store.StatusEnded}, store.StatusChange{}
	cases := []struct {
		name    string
		typ     string
		payload string
		kernel  bool
		want    store.StatusChange
	}{
		{"started", event.ExecutionStarted, `{}`, false, set(store.UnfinishedRunning, "")},
		{"resumed", event.ExecutionResumed, `null`, false, set(store.UnfinishedRunning, "")},
		{"suspended", event.ExecutionSuspended, `{"on":"g"}`, false, set(store.UnfinishedSuspended, "")},
		{"completed", event.ExecutionCompleted, `{}`, false, ended},
		{"failed", event.ExecutionFailed, `{}`, false, ended},
		{"cancelled", event.ExecutionCancelled, `{}`, false, ended},
		{"continued", event.ExecutionContinued, `{"nextExecutionId":"x~1"}`, true, set(store.UnfinishedContinued, "x~1")},
		{"continued, not kernel-stamped", event.ExecutionContinued, `{"nextExecutionId":"x~1"}`, false, kept},
		{"continued to nobody", event.ExecutionContinued, `{}`, true, ended},
		{"continued, successor not a string", event.ExecutionContinued, `{"nextExecutionId":7}`, true, ended},
		{"continued, successor spelled otherwise", event.ExecutionContinued, `{"NextExecutionId":"x~1"}`, true, ended},
		{"continued, member given twice", event.ExecutionContinued, `{"nextExecutionId":"a","nextExecutionId":"b"}`, true, ended},
		{"continued, payload not an object", event.ExecutionContinued, `"x~1"`, true, ended},
		{"recovered", event.ExecutionRecovered, `{}`, true, kept},
		{"migrated", event.ExecutionMigrated, `{}`, true, kept},
		{"denied", event.ExecutionDenied, `{}`, true, kept},
		{"a step", event.StepCompleted, `{}`, false, kept},
		{"unknown", "user.Thing", `{}`, false, kept},
	}
	for _, c := range cases {
		if got := store.EventStatus(envelope(3, c.typ, c.payload, c.kernel)); got != c.want {
			t.Errorf("%s: EventStatus = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestStatusChangeOf(t *testing.T) {
	step := func(seq int64) event.Envelope { return envelope(seq, event.StepCompleted, `{}`, false) }
	if got := store.StatusChangeOf(0, []event.Envelope{step(0), step(1)}); got.Move != store.StatusSet ||
		got.Status != store.UnfinishedRunning || got.Sequence != 0 || got.Timestamp != 100 {
		t.Errorf("a first batch with no status event = %+v, want running at 0", got)
	}
	if got := store.StatusChangeOf(2, []event.Envelope{step(2)}); got.Move != store.StatusKept {
		t.Errorf("a later batch with no status event = %+v, want kept", got)
	}
	batch := []event.Envelope{envelope(4, event.ExecutionSuspended, `{}`, false), step(5),
		envelope(6, event.ExecutionContinued, `{"nextExecutionId":"n"}`, false), step(7)}
	if got := store.StatusChangeOf(4, batch); got.Status != store.UnfinishedSuspended || got.Sequence != 4 {
		t.Errorf("StatusChangeOf = %+v, want suspended at 4 (the unstamped continue is inert)", got)
	}
	if got := store.StatusChangeOf(0, nil); got.Move != store.StatusKept {
		t.Errorf("no events = %+v, want kept", got)
	}
	for _, id := range []string{store.InboxStreamPrefix + "1:a:t", store.InboxStreamPrefix} {
		if !store.IsInboxStream(id) {
			t.Errorf("IsInboxStream(%q) = false", id)
		}
	}
	for _, id := range []string{"__loom_inbox__", "exec", "x" + store.InboxStreamPrefix} {
		if store.IsInboxStream(id) {
			t.Errorf("IsInboxStream(%q) = true", id)
		}
	}
}

// TestStatusRuleNeverMissesWhatTheFoldLeavesOpen: over random logs, the
// entry StatusChangeOf keeps batch by batch lists every execution the fold
// leaves pending, running or suspended (with that status), and every one
// it leaves continued to a successor (with it); it ends the others. Inert
// starts and resumes (which it lists as running) are drawn too, so this
// checks the superset, not equality.
func TestStatusRuleNeverMissesWhatTheFoldLeavesOpen(t *testing.T) {
	types := []string{event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed,
		event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled, event.ExecutionContinued,
		event.ExecutionRecovered, event.ExecutionMigrated, event.StepCompleted}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var log []event.Envelope
		entry := store.StatusChange{}
		for len(log) < 1+rng.IntN(15) {
			from := int64(len(log))
			var batch []event.Envelope
			for range 1 + rng.IntN(3) {
				seq := from + int64(len(batch))
				typ := types[rng.IntN(len(types))]
				payload := `{}`
				if typ == event.ExecutionContinued && rng.IntN(4) > 0 {
					payload = `{"nextExecutionId":"next"}`
				}
				batch = append(batch, envelope(seq, typ, payload, rng.IntN(3) > 0))
			}
			if c := store.StatusChangeOf(from, batch); c.Move != store.StatusKept {
				entry = c
			}
			log = append(log, batch...)
		}
		st := fold.Fold(log)
		want := map[fold.Status]store.UnfinishedStatus{fold.StatusPending: store.UnfinishedRunning,
			fold.StatusRunning: store.UnfinishedRunning, fold.StatusSuspended: store.UnfinishedSuspended}[st.Status]
		if st.Status == fold.StatusContinued && st.Variables.ContinuedTo != "" {
			want = store.UnfinishedContinued
		}
		switch {
		case want == "" && entry.Move == store.StatusSet && entry.Status != store.UnfinishedRunning:
			t.Fatalf("seed %d: the fold says %s, the index %+v", seed, st.Status, entry)
		case want == "":
		case entry.Move != store.StatusSet:
			t.Fatalf("seed %d: the fold leaves it %s, the index drops it (%+v)", seed, st.Status, entry)
		case entry.Status == store.UnfinishedContinued && entry.Next != st.Variables.ContinuedTo:
			t.Fatalf("seed %d: the fold continues to %q, the index says %+v", seed, st.Variables.ContinuedTo, entry)
		case entry.Status != want && entry.Status != store.UnfinishedRunning:
			t.Fatalf("seed %d: the fold says %s, the index %s", seed, st.Status, entry.Status)
		}
	}
}
