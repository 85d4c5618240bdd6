// Package fanouttest checks what a fan-out of child flows left in an event
// store, for the fan-out tests of every storage adapter.
package fanouttest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// CheckChildren checks that events holds parent and exactly n children,
// child i named name(i), each started once, first, as parent's child of
// that name, and completed with output(i) as its JSON output. It returns
// how many events the children's logs hold.
func CheckChildren(ctx context.Context, t testing.TB, events store.EventStore, parent string, n int,
	name func(int) string, output func(int) string) int {
	t.Helper()
	executions := 0
	for after := ""; ; {
		page, err := events.ListExecutions(ctx, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		executions += len(page.Executions)
		if after = page.Next; after == "" {
			break
		}
	}
	if executions != n+1 {
		t.Fatalf("%d executions in the store, want the parent and %d children", executions, n)
	}
	total := 0
	for i := range n {
		id := loom.ChildID(parent, name(i))
		log, err := store.Read(ctx, events, id)
		if err != nil {
			t.Fatal(err)
		}
		total += len(log)
		starts := 0
		for _, e := range log {
			if e.Type == event.ExecutionStarted {
				starts++
			}
		}
		var p struct {
			Parent loom.ParentLink `json:"parent"`
		}
		if len(log) == 0 || starts != 1 || log[0].Type != event.ExecutionStarted || json.Unmarshal(log[0].Payload, &p) != nil ||
			p.Parent != (loom.ParentLink{ExecutionID: parent, Name: name(i)}) {
			t.Fatalf("child %s: %d events, %d EXECUTION_STARTED, parent %+v; want one start, first, naming %s/%s",
				id, len(log), starts, p.Parent, parent, name(i))
		}
		if st := fold.Fold(log); st.Status != fold.StatusCompleted || string(st.Variables.Output) != output(i) {
			t.Fatalf("child %s is %s with output %s, want completed with %s", id, st.Status, st.Variables.Output, output(i))
		}
	}
	return total
}
