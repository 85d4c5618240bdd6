package crypto_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestSnapshotsSealShredAndRefuseTampering(t *testing.T) {
	events, _, keys := newMemSealed(t)
	ctx := context.Background()
	if err := events.Append(ctx, "x", 0, sampleLog("x")); err != nil {
		t.Fatal(err)
	}
	inner := memstore.NewSnapshotStore()
	s, err := crypto.NewSnapshotStore(inner, keys, events, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := store.Snapshot{ExecutionID: "x", Sequence: 3, SchemaVersion: "1.26.0", State: []byte(`{"SECRET":"state"}`)}
	if err := s.Save(ctx, snap); err != nil {
		t.Fatal(err)
	}
	raw, _, _ := inner.LoadLatest(ctx, "x")
	if bytes.Contains(raw.State, []byte("SECRET")) {
		t.Fatal("the inner store holds the state in plaintext")
	}
	if got, ok, err := s.LoadAt(ctx, "x", 5); err != nil || !ok || !bytes.Equal(got.State, snap.State) {
		t.Fatalf("LoadAt = %q, %v, %v", got.State, ok, err)
	}

	// Tampering: a flipped byte, a state moved to another sequence, a
	// plaintext state of a sealed execution.
	tampered := map[string]store.Snapshot{}
	flipped := raw
	flipped.State = bytes.Clone(raw.State)
	flipped.State[len(flipped.State)-1] ^= 1
	tampered["flipped byte"] = flipped
	moved := raw
	moved.Sequence = 4
	tampered["moved"] = moved
	tampered["plaintext"] = store.Snapshot{ExecutionID: "x", Sequence: 3, SchemaVersion: "1.26.0",
		State: append([]byte("\x00loom-plain-snapshot/1\x00"), snap.State...)}
	tampered["foreign"] = store.Snapshot{ExecutionID: "x", Sequence: 3, SchemaVersion: "1.26.0", State: snap.State}
	for name, bad := range tampered {
		in := memstore.NewSnapshotStore()
		if err := in.Save(ctx, bad); err != nil {
			t.Fatal(err)
		}
		w, _ := crypto.NewSnapshotStore(in, keys, events, nil)
		if _, _, err := w.LoadLatest(ctx, "x"); !errors.Is(err, crypto.ErrSeal) {
			t.Fatalf("%s: LoadLatest = %v, want *SealError", name, err)
		}
	}

	// An execution without a subject is stored unsealed, framed.
	if err := events.Append(ctx, "plain", 0, []event.Envelope{env("plain", 0, event.ExecutionStarted, `{"input":7}`)}); err != nil {
		t.Fatal(err)
	}
	plain := store.Snapshot{ExecutionID: "plain", Sequence: 0, SchemaVersion: "1.26.0", State: []byte("{}")}
	if err := s.Save(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := inner.LoadLatest(ctx, "plain"); !bytes.HasPrefix(r.State, []byte("\x00loom-plain-snapshot/1\x00")) {
		t.Fatalf("unsealed state stored as %q", r.State)
	}
	if got, ok, err := s.LoadLatest(ctx, "plain"); err != nil || !ok || string(got.State) != "{}" {
		t.Fatalf("LoadLatest(plain) = %q, %v, %v", got.State, ok, err)
	}

	// After erasure the snapshot reads as none, and Save is refused.
	if _, err := events.EraseSubject(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LoadLatest(ctx, "x"); ok || err != nil {
		t.Fatalf("LoadLatest after erasure = %v, %v; want none, nil", ok, err)
	}
	if err := s.Save(ctx, snap); !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("Save after erasure = %v, want ErrKeyDestroyed", err)
	}
}

func TestContentSealsPerSubjectAndShreds(t *testing.T) {
	dir := t.TempDir()
	keys := openKeys(t, dir)
	inner := keepOpen{memstore.NewContentStore()}
	index := filepath.Join(dir, "content.index")
	c, err := crypto.NewContentStore(inner, keys, crypto.ContentStoreOptions{IndexPath: index})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	blob := []byte("SECRET claim-checked output")
	if _, err := c.Put(ctx, blob); !errors.Is(err, crypto.ErrNoSubject) {
		t.Fatalf("Put without a subject = %v, want ErrNoSubject (fail closed)", err)
	}
	alice, bob := crypto.WithSubject(ctx, "alice"), crypto.WithSubject(ctx, "bob")
	ref, err := c.Put(alice, blob)
	if err != nil || ref != store.ContentRef(blob) {
		t.Fatalf("Put = %q, %v; want the plaintext's ref", ref, err)
	}
	if _, err := c.Put(bob, blob); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := inner.Stats(); n != 2 {
		t.Fatalf("inner holds %d blobs, want 2: subjects never share a sealed blob", n)
	}
	if got, err := c.Get(alice, ref); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if _, err := c.Get(crypto.WithSubject(ctx, "carol"), ref); !errors.Is(err, store.ErrContentNotFound) {
		t.Fatalf("Get as a subject that never put it = %v, want ErrContentNotFound", err)
	}
	if _, err := keys.Destroy(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(alice, ref); !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("Get after erasure = %v, want ErrKeyDestroyed", err)
	}
	if got, err := c.Get(bob, ref); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("bob's copy after alice's erasure: %q, %v", got, err)
	}
	if n, err := c.PurgeSubject(ctx, "alice"); err != nil || n != 1 {
		t.Fatalf("PurgeSubject = %d, %v", n, err)
	}
	if n, _, _ := inner.Stats(); n != 1 {
		t.Fatalf("inner holds %d blobs after the purge, want 1", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// A torn last line of the index (a crash mid-write) is dropped; the
	// entries before it survive.
	f, err := os.OpenFile(index, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"op":"put","s":"bob","h":"to`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := crypto.NewContentStore(inner, openKeys(t, dir), crypto.ContentStoreOptions{IndexPath: index})
	if err != nil {
		t.Fatalf("reopen after a torn index line: %v", err)
	}
	if got, err := c2.Get(bob, ref); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("Get after reopen: %q, %v", got, err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	// A bad line before the end is a typed refusal.
	if err := os.WriteFile(index, []byte("garbage\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var fe *crypto.KeyStoreFileError
	if _, err := crypto.NewContentStore(memstore.NewContentStore(), keys, crypto.ContentStoreOptions{IndexPath: index}); !errors.As(err, &fe) {
		t.Fatalf("a corrupt index: %v, want *KeyStoreFileError", err)
	}
}

// keepOpen is a content store that outlives its wrapper's Close, so a
// test can reopen the wrapper (its index file) over the same blobs.
type keepOpen struct{ *memstore.ContentStore }

func (keepOpen) Close() error { return nil }
