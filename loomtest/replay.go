package loomtest

import (
	"context"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/replay"
	"github.com/loom-kernel/loom/store"
)

// ReplayStored is the CI gate of a deploy: it replays every execution of
// events — in flight and ended — against flows (the code about to ship;
// see replay.Check) and reports each one the code would not replay as a
// test error naming the execution, the sequence where the code parts from
// the log, what the log has there, what the code does instead and where.
// It returns the report. A store that cannot be read stops the test.
// Nothing runs and nothing is written to events.
//
//	func TestNewCodeReplaysProductionLogs(t *testing.T) {
//		ro, _ := sqlite.OpenReadOnly("testdata/prod-copy.db")
//		loomtest.ReplayStored(t, ro.EventStore(), app.Flows()...)
//	}
func ReplayStored(t testing.TB, events store.EventStore, flows ...*loom.Flow) *replay.Report {
	t.Helper()
	return ReplayStoredWith(t, events, loom.Config{Flows: flows}, replay.Options{Ended: -1})
}

// ReplayStoredWith is ReplayStored with the candidate's whole
// configuration (its Features, say) and replay.Options (a sample of ended
// executions instead of all of them).
func ReplayStoredWith(t testing.TB, events store.EventStore, cfg loom.Config, opts replay.Options) *replay.Report {
	t.Helper()
	ctx := t.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := replay.Check(ctx, events, cfg, opts)
	if err != nil {
		t.Fatalf("loomtest: replaying the stored executions: %v", err)
		return nil
	}
	for _, x := range rep.Executions {
		if !x.Compatible() {
			t.Errorf("loomtest: the new code would not replay %s", x)
		}
	}
	return rep
}
