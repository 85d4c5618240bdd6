package loom_test

import (
	"errors"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
)

func TestMarkShreddedRecordsTheSubjectOnceOnAParkedOrEndedExecution(t *testing.T) {
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, gatedFlow())
	id := parked(t, h)
	for range 2 {
		if err := h.rt.MarkShredded(h.ctx(), id, "user-42"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := h.rt.LoadState(h.ctx(), id)
	if err != nil || len(st.Variables.Shredded) != 1 || st.Variables.Shredded[0].Subject != "user-42" || st.Status != "suspended" {
		t.Fatalf("%+v %v", st.Variables.Shredded, err)
	}
	if n := count(h, id, event.PayloadShredded); n != 1 {
		t.Fatalf("PAYLOAD_SHREDDED %d times", n)
	}
	if err := h.rt.Cancel(h.ctx(), id, "done"); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.MarkShredded(h.ctx(), id, "user-7"); err != nil {
		t.Fatalf("on an ended execution: %v", err)
	}
	before := len(h.log(id))
	if err := h.rt.MarkShredded(h.ctx(), "no-such", "user-7"); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("an unknown execution: %v", err)
	}
	if err := h.rt.MarkShredded(h.ctx(), id, ""); err == nil {
		t.Fatal("an empty subject was recorded")
	}
	if len(h.log(id)) != before {
		t.Fatal("a refusal appended")
	}
}

// An operator's tool records the fact without the app's flows.
func TestMarkShreddedNeedsNotTheFlow(t *testing.T) {
	h := newHarnessWith(t, loom.Config{StickyParks: -1}, gatedFlow())
	id := parked(t, h)
	h.rt.Close()
	tool := h.open() // no flows
	if err := tool.MarkShredded(h.ctx(), id, "user-1"); err != nil {
		t.Fatal(err)
	}
	if n := count(h, id, event.PayloadShredded); n != 1 {
		t.Fatalf("PAYLOAD_SHREDDED %d times", n)
	}
	if err := tool.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve"}); !errors.Is(err, loom.ErrUnknownFlow) {
		t.Fatalf("a resume without the flow: %v", err)
	}
}
