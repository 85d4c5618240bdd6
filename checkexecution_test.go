package loom_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func logOf(t *testing.T, events store.EventStore, id string) []event.Envelope {
	t.Helper()
	evs, err := store.Read(context.Background(), events, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// CheckExecution reads the log from the runtime's own store and judges it
// against the registered code, as CheckReplay does: the unchanged code is
// compatible, a renamed step diverges where the log has it, a new pin is
// a code-pin mismatch naming both pins — and no check appends or runs
// anything.
func TestCheckExecutionJudgesAStoredLogAgainstTheRegisteredCode(t *testing.T) {
	ctx := context.Background()
	events := memstore.NewEventStore()
	var runs atomic.Int64
	recorder := checkRuntime(t, events, checkFlow{steps: []string{"a", "b"}, gate: "g",
		options: []loom.FlowOption{loom.WithCodeFingerprint("v1")}}.build(&runs))
	id, err := recorder.Start(ctx, "order", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recorder.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	recorder.Close()
	before := logOf(t, events, id)
	ran := runs.Load()

	for _, c := range []struct {
		name    string
		flow    checkFlow
		verdict loom.ReplayVerdict
	}{
		{"same code", checkFlow{steps: []string{"a", "b"}, gate: "g", options: []loom.FlowOption{loom.WithCodeFingerprint("v1")}}, loom.ReplayCompatible},
		{"a renamed step", checkFlow{steps: []string{"a", "b2"}, gate: "g", options: []loom.FlowOption{loom.WithCodeFingerprint("v1")}}, loom.ReplayDiverged},
		{"a new pin", checkFlow{steps: []string{"a", "b"}, gate: "g", options: []loom.FlowOption{loom.WithCodeFingerprint("v2")}}, loom.ReplayPinMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := checkRuntime(t, events, c.flow.build(&runs))
			rep, err := rt.CheckExecution(ctx, id)
			if err != nil || rep.Verdict != c.verdict || rep.ExecutionID != id || rep.Length != len(before) {
				t.Fatalf("CheckExecution: %s, %v", rep, err)
			}
			switch c.verdict {
			case loom.ReplayDiverged:
				if want := seqOf(before, "STEP_STARTED", stepStarted("b")); rep.Sequence == nil || *rep.Sequence != want {
					t.Fatalf("diverged at %v, want #%d: %s", rep.Sequence, want, rep)
				}
			case loom.ReplayPinMismatch:
				if rep.RecordedPin != "v1" || rep.RegisteredPin != "v2" {
					t.Fatalf("pins %q and %q, want v1 and v2: %s", rep.RecordedPin, rep.RegisteredPin, rep)
				}
			}
			assertSameEvents(t, "log after the check", logOf(t, events, id), before)
			if runs.Load() != ran {
				t.Fatal("a check ran a step")
			}
		})
	}
}

// A compacted log is checked whole, its archived events in their place;
// without Config.Archive the check is refused with a typed error, as an
// unknown or malformed id is.
func TestCheckExecutionReadsACompactedLogThroughTheArchive(t *testing.T) {
	ctx := context.Background()
	w := newCompactWorld(8, 6)
	rt := w.open(t, true)
	id := parkedRun(t, rt)
	if _, err := rt.Compact(ctx, id, 9); err != nil {
		t.Fatal(err)
	}
	rep, err := rt.CheckExecution(ctx, id)
	if err != nil || !rep.Compatible() || rep.Length != len(w.history(t, id)) {
		t.Fatalf("a compacted log: %s, %v", rep, err)
	}

	bare := w.open(t, false)
	var nc *loom.NotConfiguredError
	if _, err := bare.CheckExecution(ctx, id); !errors.As(err, &nc) || nc.Field != "Archive" {
		t.Fatalf("a compacted log without an archive: %v", err)
	}
	if _, err := bare.CheckExecution(ctx, "nobody"); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	var bad *event.InvalidEnvelopeError
	if _, err := bare.CheckExecution(ctx, "bad\x00id"); !errors.As(err, &bad) {
		t.Fatalf("a malformed id: %v", err)
	}
}
