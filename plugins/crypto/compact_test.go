package crypto_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
)

// compactRuntime is newRuntime with Config.Archive set to archive.
func compactRuntime(t *testing.T, s *sealedSQLite, archive store.ArchiveStore) *loom.Runtime {
	t.Helper()
	set := s.set
	set.Archive = archive
	rt, err := loom.New(loom.Config{Storage: set, Flows: kycFlows(), Features: loom.Features{Inbox: true},
		Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// TestCompactionKeepsArchivedEventsSealed compacts a sealed execution
// through the runtime: the archive beneath the sealing archive holds the
// log's sealed bytes (no plaintext, the same ciphertext the log held), the
// runtime reads the archived events in plaintext, and the execution still
// loads.
func TestCompactionKeepsArchivedEventsSealed(t *testing.T) {
	ctx := context.Background()
	s := openSealedSQLite(t, t.TempDir())
	archive, err := crypto.NewArchiveStore(s.raw.Archive, s.keys, s.events, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := compactRuntime(t, s, archive)
	done, _, _ := runKYC(t, rt)
	plain, err := s.events.ReadFrom(ctx, done, 0)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.raw.Events.ReadFrom(ctx, done, 0)
	if err != nil {
		t.Fatal(err)
	}
	through := int64(len(plain) - 2)
	if res, err := rt.Compact(ctx, done, through); err != nil || res.Archived != int(through) {
		t.Fatalf("Compact = %+v, %v", res, err)
	}
	raw, err := s.raw.Archive.ReadArchived(ctx, done, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range raw {
		if strings.Contains(string(e.Payload), secret) {
			t.Fatalf("archived #%d holds plaintext: %s", e.Sequence, e.Payload)
		}
		if string(e.Payload) != string(stored[i+1].Payload) {
			t.Fatalf("archived #%d is not the log's stored bytes:\n%s\n%s", e.Sequence, e.Payload, stored[i+1].Payload)
		}
	}
	archived, err := rt.ReadArchived(ctx, done, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var opened bool
	for i, e := range archived {
		if string(e.Payload) != string(plain[i+1].Payload) {
			t.Fatalf("ReadArchived #%d = %s, want the plaintext %s", e.Sequence, e.Payload, plain[i+1].Payload)
		}
		opened = opened || strings.Contains(string(e.Payload), secret)
	}
	if !opened {
		t.Fatal("no archived event read back holds the secret: the test archived nothing sealed")
	}
	if _, err := rt.LoadState(ctx, done); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionRefusesAnArchiveThatWouldHoldPlaintext: with a sealed log
// and an unwrapped archive, Compact is refused before anything is written.
func TestCompactionRefusesAnArchiveThatWouldHoldPlaintext(t *testing.T) {
	ctx := context.Background()
	s := openSealedSQLite(t, t.TempDir())
	rt := compactRuntime(t, s, s.raw.Archive)
	done, _, _ := runKYC(t, rt)
	lister := s.raw.Snapshots.(store.SnapshotLister)
	before, _ := lister.ListSequences(ctx, done)
	_, err := rt.Compact(ctx, done, 2)
	var le *store.ArchiveLayerError
	if !errors.As(err, &le) || le.Store != "crypto.EventStore" {
		t.Fatalf("Compact into an unwrapped archive = %v, want *store.ArchiveLayerError", err)
	}
	if raw, _ := s.raw.Archive.ReadArchived(ctx, done, 0, -1); len(raw) != 0 {
		t.Fatalf("the refused compaction archived %d events", len(raw))
	}
	if trimmed, _ := s.events.TrimmedThrough(ctx, done); trimmed != 0 {
		t.Fatalf("the refused compaction trimmed the log through #%d", trimmed)
	}
	if after, _ := lister.ListSequences(ctx, done); !slices.Equal(after, before) {
		t.Fatalf("the refused compaction changed the snapshots: %v → %v", before, after)
	}
}
