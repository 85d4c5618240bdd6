package storetest

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// SnapshotStoreFactory builds the stores RunSnapshotStore checks.
type SnapshotStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it. It is called once
	// per subtest.
	New func(t *testing.T) store.SnapshotStore
	// Reopen is optional: it reopens the durable storage behind a store New
	// returned, after the kit closed it. When nil the Reopen subtest is left out.
	Reopen func(t *testing.T, closed store.SnapshotStore) store.SnapshotStore
}

// snapshotKit carries the factory through the SnapshotStore subtests.
type snapshotKit struct{ f SnapshotStoreFactory }

// RunSnapshotStore runs the SnapshotStore conformance kit against the stores
// f builds, one fresh store per named subtest: save and load (latest, at or
// below a sequence, missing), overwrite at one sequence, byte-exact state
// (binary and 1 MiB included), isolation between executions and from the
// caller's buffers, then ListSequences, Prune and DeleteExecution (skipped,
// by name, when the store lacks them), Close, and Reopen when f.Reopen is set.
func RunSnapshotStore(t *testing.T, f SnapshotStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: SnapshotStoreFactory.New is nil")
	}
	k := snapshotKit{f: f}
	t.Run("SaveAndLoadLatest", k.saveAndLoadLatest)
	t.Run("LoadAt", k.loadAt)
	t.Run("LoadMissing", k.loadMissing)
	t.Run("OverwriteSameSequence", k.overwrite)
	t.Run("StateBytesExact", k.stateBytesExact)
	t.Run("LargeState", k.largeState)
	t.Run("CallerMutationIsolation", k.mutationIsolation)
	t.Run("ListSequences", k.listSequences)
	t.Run("Prune", k.prune)
	t.Run("DeleteExecution", k.deleteExecution)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: SnapshotStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// open returns a fresh store for one subtest.
func (k snapshotKit) open(t *testing.T) store.SnapshotStore {
	t.Helper()
	return openStore(t, "SnapshotStoreFactory.New", k.f.New)
}

// snapshotAt is a snapshot of exec at seq with a small JSON state.
func snapshotAt(exec string, seq int64) store.Snapshot {
	return store.Snapshot{
		ExecutionID:   exec,
		Sequence:      seq,
		SchemaVersion: event.SchemaVersion,
		State:         []byte(`{"status":"running","sequence":` + strconv.FormatInt(seq, 10) + `}`),
	}
}

// mustSave saves and fails the test on an error.
func mustSave(t *testing.T, s store.SnapshotStore, snaps ...store.Snapshot) {
	t.Helper()
	for _, sn := range snaps {
		if err := s.Save(context.Background(), sn); err != nil {
			t.Fatalf("Save(%q at %d): %v", sn.ExecutionID, sn.Sequence, err)
		}
	}
}

// expectSnapshot checks one load: found iff want is non-nil, and then equal
// to *want field by field, state bytes exactly.
func expectSnapshot(t *testing.T, what string, got store.Snapshot, found bool, err error, want *store.Snapshot) {
	t.Helper()
	switch {
	case err != nil:
		t.Fatalf("%s: %v", what, err)
	case want == nil && found:
		t.Fatalf("%s found a snapshot at %d, want none", what, got.Sequence)
	case want == nil:
		return
	case !found:
		t.Fatalf("%s found nothing, want the snapshot at %d", what, want.Sequence)
	case got.ExecutionID != want.ExecutionID || got.Sequence != want.Sequence || got.SchemaVersion != want.SchemaVersion:
		t.Fatalf("%s = {%q, %d, %q}, want {%q, %d, %q}", what, got.ExecutionID, got.Sequence, got.SchemaVersion,
			want.ExecutionID, want.Sequence, want.SchemaVersion)
	case !bytes.Equal(got.State, want.State):
		t.Fatalf("%s: state %s, want %s", what, excerpt(got.State), excerpt(want.State))
	}
}

// latest loads the latest snapshot of exec and checks it against want.
func latest(t *testing.T, s store.SnapshotStore, exec string, want *store.Snapshot) {
	t.Helper()
	got, found, err := s.LoadLatest(context.Background(), exec)
	expectSnapshot(t, "LoadLatest("+strconv.Quote(exec)+")", got, found, err, want)
}

// at loads the snapshot of exec at or below atMost and checks it.
func at(t *testing.T, s store.SnapshotStore, exec string, atMost int64, want *store.Snapshot) {
	t.Helper()
	got, found, err := s.LoadAt(context.Background(), exec, atMost)
	expectSnapshot(t, "LoadAt("+strconv.Quote(exec)+", "+itoa(atMost)+")", got, found, err, want)
}

// saveAndLoadLatest: LoadLatest returns the highest sequence whatever the
// save order, with its schema version, per execution.
func (k snapshotKit) saveAndLoadLatest(t *testing.T) {
	s := k.open(t)
	s5, s10, s7 := snapshotAt("x", 5), snapshotAt("x", 10), snapshotAt("x", 7)
	s5.SchemaVersion = "1.25.0"
	mustSave(t, s, s5)
	latest(t, s, "x", &s5)
	mustSave(t, s, s10, s7)
	latest(t, s, "x", &s10)
	y := snapshotAt("y", 2)
	mustSave(t, s, y)
	latest(t, s, "y", &y)
	latest(t, s, "x", &s10)
	at(t, s, "x", 5, &s5)
}

// loadAt: LoadAt returns the highest sequence <= atMost, including between
// snapshots, and nothing below the first one.
func (k snapshotKit) loadAt(t *testing.T) {
	s := k.open(t)
	s5, s7, s10 := snapshotAt("x", 5), snapshotAt("x", 7), snapshotAt("x", 10)
	mustSave(t, s, s10, s5, s7)
	for _, c := range []struct {
		atMost int64
		want   *store.Snapshot
	}{
		{100, &s10}, {10, &s10}, {9, &s7}, {8, &s7}, {7, &s7}, {6, &s5}, {5, &s5}, {4, nil}, {0, nil}, {-1, nil},
	} {
		at(t, s, "x", c.atMost, c.want)
	}
	at(t, s, "other", 100, nil)
}

// loadMissing: an execution without snapshots loads nothing, without error.
func (k snapshotKit) loadMissing(t *testing.T) {
	s := k.open(t)
	latest(t, s, "none", nil)
	at(t, s, "none", 10, nil)
	mustSave(t, s, snapshotAt("some", 3))
	latest(t, s, "none", nil)
	latest(t, s, "som", nil)
}

// overwrite: a second Save at the same sequence replaces the first.
func (k snapshotKit) overwrite(t *testing.T) {
	s := k.open(t)
	first, second := snapshotAt("x", 5), snapshotAt("x", 5)
	second.State = []byte(`{"status":"suspended"}`)
	mustSave(t, s, snapshotAt("x", 3), first, snapshotAt("x", 8), second)
	at(t, s, "x", 5, &second)
	at(t, s, "x", 7, &second)
	if l, ok := s.(store.SnapshotLister); ok {
		seqs, err := l.ListSequences(context.Background(), "x")
		if err != nil || !slices.Equal(seqs, []int64{3, 5, 8}) {
			t.Fatalf("ListSequences after an overwrite = %v, %v; want [3 5 8]", seqs, err)
		}
	}
}

// stateBytesExact: state is opaque bytes and comes back exactly: JSON
// with whitespace, big numbers and <>&, and every byte value 0..255.
func (k snapshotKit) stateBytesExact(t *testing.T) {
	s := k.open(t)
	text := snapshotAt("x", 1)
	text.State = []byte("{ \"big\" : 12345678901234567890,\n\"f\":1.0, \"html\":\"<>&\", \"u\":\"é日本\" }")
	binary := snapshotAt("x", 2)
	binary.State = make([]byte, 512)
	for i := range binary.State {
		binary.State[i] = byte(i)
	}
	mustSave(t, s, text, binary)
	at(t, s, "x", 1, &text)
	at(t, s, "x", 2, &binary)
}

// largeState: a 1 MiB state round-trips byte for byte.
func (k snapshotKit) largeState(t *testing.T) {
	s := k.open(t)
	big := snapshotAt("x", 42)
	big.State = stringPayload(1 << 20)
	mustSave(t, s, big)
	latest(t, s, "x", &big)
}

// mutationIsolation: changing a saved or loaded state buffer changes
// nothing stored.
func (k snapshotKit) mutationIsolation(t *testing.T) {
	s := k.open(t)
	in := snapshotAt("x", 1)
	want := snapshotAt("x", 1)
	mustSave(t, s, in)
	in.State[0] = 'X'
	got, _, err := s.LoadLatest(context.Background(), "x")
	if err != nil {
		t.Fatalf("LoadLatest: %v", err)
	}
	if len(got.State) > 0 {
		got.State[0] = 'Y'
	}
	latest(t, s, "x", &want)
}
