package event_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// knownTypesDigests pins each event schema version to the sha256 of its
// sorted KnownTypes joined by "\n" (spec §4, K5: the version and the pinned
// type set MUST change together). A new version adds a row; rows are never
// edited, so an old version's set stays on record.
var knownTypesDigests = map[string]string{
	"1.26.0": "0423b1a9c16d7d39598de006087c86f1f567551e3353be2888293f07c9c58149",
}

// TestSchemaVersionPinsKnownTypes is the eventSchema.test.ts of spec §10:
// it fails on an undocumented drift of the event type set (K5).
func TestSchemaVersionPinsKnownTypes(t *testing.T) {
	sum := sha256.Sum256([]byte(strings.Join(event.KnownTypes(), "\n")))
	got := hex.EncodeToString(sum[:])
	want, ok := knownTypesDigests[event.SchemaVersion]
	if !ok {
		t.Fatalf("SchemaVersion %q has no recorded KnownTypes digest (current digest %s): "+
			"bump SchemaVersion and record the new digest together", event.SchemaVersion, got)
	}
	if got != want {
		t.Fatalf("KnownTypes changed under SchemaVersion %q (digest %s, recorded %s): "+
			"bump SchemaVersion and record the new digest together", event.SchemaVersion, got, want)
	}
}

// allTypeConstants lists every exported event type constant of the package.
var allTypeConstants = []string{
	event.ExecutionStarted, event.ExecutionSuspended, event.ExecutionResumed,
	event.ExecutionCompleted, event.ExecutionFailed, event.ExecutionCancelled,
	event.ExecutionContinued, event.ExecutionRecovered, event.ExecutionMigrated,
	event.ExecutionDenied, event.StepStarted, event.StepCompleted, event.StepFailed,
	event.StepRetrying, event.StepCancelled, event.DecisionRecorded, event.TimerFired,
	event.EffectInDoubt, event.EffectDenied, event.ResourceMetered, event.QuotaExceeded,
	event.SafetyBlocked, event.EgressDenied, event.OutcomeRecorded, event.ApprovalGranted,
	event.PayloadShredded, event.MessageConsumed, event.ParallelCompleted,
	event.EventsRehomed, event.InboxQuarantined, event.InboxReleased,
}

func TestKnownTypesSortedUniqueAndComplete(t *testing.T) {
	types := event.KnownTypes()
	if !slices.IsSorted(types) {
		t.Errorf("KnownTypes() is not sorted: %v", types)
	}
	seen := map[string]bool{}
	for _, typ := range types {
		if seen[typ] {
			t.Errorf("KnownTypes() lists %s twice", typ)
		}
		seen[typ] = true
		if !event.IsKnown(typ) {
			t.Errorf("IsKnown(%s) = false for a listed type", typ)
		}
	}
	for _, c := range allTypeConstants {
		if !seen[c] {
			t.Errorf("constant %s is not in KnownTypes()", c)
		}
	}
	if len(types) != len(allTypeConstants) {
		t.Errorf("KnownTypes() has %d types, the package declares %d constants", len(types), len(allTypeConstants))
	}
	if event.IsKnown("NOTE_TAKEN") || event.IsKnown("") || event.IsKnown("step_completed") {
		t.Error("IsKnown accepts a type outside the kernel namespace")
	}
}

func TestKnownTypesReturnsACopy(t *testing.T) {
	a := event.KnownTypes()
	a[0] = "MUTATED"
	if b := event.KnownTypes(); b[0] == "MUTATED" {
		t.Fatal("KnownTypes() exposes its backing array")
	}
}

// TestSpec4StatusMovedOnlyByExecutionLevelEvents pins IsStatusEvent to the
// execution-level types of spec §4 (plus the Wave 2 continued status).
func TestSpec4StatusMovedOnlyByExecutionLevelEvents(t *testing.T) {
	want := map[string]bool{
		event.ExecutionStarted: true, event.ExecutionSuspended: true, event.ExecutionResumed: true,
		event.ExecutionCompleted: true, event.ExecutionFailed: true, event.ExecutionCancelled: true,
		event.ExecutionContinued: true,
	}
	for _, typ := range allTypeConstants {
		if got := event.IsStatusEvent(typ); got != want[typ] {
			t.Errorf("IsStatusEvent(%s) = %v, want %v", typ, got, want[typ])
		}
	}
	if event.IsStatusEvent("NOTE_TAKEN") {
		t.Error("IsStatusEvent accepts an application type")
	}
}

// TestSpec5UserspaceEmitsRefuseKernelTypes pins the ADR 0104 allow-list.
func TestSpec5UserspaceEmitsRefuseKernelTypes(t *testing.T) {
	allowed := map[string]bool{
		event.ResourceMetered: true, event.QuotaExceeded: true, event.SafetyBlocked: true,
		event.EgressDenied: true, event.EffectDenied: true, event.OutcomeRecorded: true,
		event.DecisionRecorded: true,
	}
	for _, typ := range allTypeConstants {
		if got := event.IsUserspaceEmittable(typ); got != allowed[typ] {
			t.Errorf("IsUserspaceEmittable(%s) = %v, want %v", typ, got, allowed[typ])
		}
	}
	if !event.IsUserspaceEmittable("NOTE_TAKEN") {
		t.Error("an application event type must be emittable")
	}
}
