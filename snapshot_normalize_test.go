package loom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

// §4-i: a snapshot folded before schema 1.21.0 is read through the
// snapshot normalizer when the runtime loads it. A release before 1.21.0
// folded a step failure handled while parked as the execution's failure;
// a new runtime that loads such a stored snapshot sees the repaired state
// — still parked on its gate, so a resume is admitted and completes —
// exactly as fold.NormalizeSnapshot gives it, while the same bytes stored
// as 1.21.0 are read as written.
func TestSpec4_APre1_21SnapshotIsReadThroughTheNormalizer(t *testing.T) {
	ctx := context.Background()
	h := newHarnessWith(t, replaying, gatedFlow())
	id := parked(t, h)
	st, err := h.rt.LoadState(h.ctx(), id)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := fold.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cur, []byte(`"status":"suspended"`)) {
		t.Fatalf("the parked state: %s", cur)
	}
	// The state as a pre-1.21 fold stored it: failed, with its park kept.
	old := bytes.Replace(cur, []byte(`"status":"suspended"`), []byte(`"status":"failed"`), 1)
	want, err := fold.NormalizeSnapshot("1.20.0", old)
	if err != nil {
		t.Fatal(err)
	}
	if want.Status != fold.StatusSuspended {
		t.Fatalf("the normalizer gives %s, want suspended", want.Status)
	}
	// Each runtime is closed before the snapshot is replaced, so no
	// snapshot of its own, written behind, lands on top of it.
	load := func(version string) fold.State {
		t.Helper()
		if err := h.rt.Close(); err != nil {
			t.Fatal(err)
		}
		if err := h.snaps.Save(ctx, store.Snapshot{ExecutionID: id, Sequence: st.Sequence, SchemaVersion: version, State: old}); err != nil {
			t.Fatal(err)
		}
		h.rt = h.open(gatedFlow())
		got, err := h.rt.LoadState(h.ctx(), id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := load("1.21.0"); got.Status != fold.StatusFailed {
		t.Fatalf("the bytes stored as 1.21.0 read as %s, want failed: only older snapshots are repaired", got.Status)
	}
	got := load("1.20.0")
	gotJSON, _ := fold.Encode(got)
	wantJSON, _ := fold.Encode(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("the runtime loaded\n%s\nthe normalizer gives\n%s", gotJSON, wantJSON)
	}
	if err := h.rt.Resume(h.ctx(), id, loom.ResumeEvent{EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatalf("a resume of the repaired park: %v", err)
	}
	if res, err := h.rt.WaitForCompletion(h.ctx(), id); err != nil || res.State.Status != fold.StatusCompleted {
		t.Fatalf("after the resume: %v %v", res.State.Status, err)
	}
}
