package crypto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/store/storetest"
)

// Compaction's capabilities: the trim is forwarded, the archive sealed.

func TestPrefixTrimmerConformanceMemstore(t *testing.T) {
	storetest.RunPrefixTrimmer(t, sealedMemstoreEvents())
}

func TestPrefixTrimmerConformanceSQLite(t *testing.T) {
	storetest.RunPrefixTrimmer(t, sealedSQLiteEvents())
}

func TestArchiveStoreConformanceMemstore(t *testing.T) {
	storetest.RunArchiveStore(t, storetest.ArchiveStoreFactory{
		New: func(t *testing.T) store.ArchiveStore {
			a, err := crypto.NewArchiveStore(memstore.NewArchiveStore(), openKeys(t, t.TempDir()), kitSubjects, kitFields())
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
	})
}

func TestArchiveSealsAndShreds(t *testing.T) {
	s, _, keys := newMemSealed(t)
	ctx := context.Background()
	log := sampleLog("x")
	if err := s.Append(ctx, "x", 0, log); err != nil {
		t.Fatal(err)
	}
	inner := memstore.NewArchiveStore()
	a, err := crypto.NewArchiveStore(inner, keys, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(ctx, "x", log[1:5]); err != nil {
		t.Fatal(err)
	}
	if err := a.Archive(ctx, "x", log[1:5]); err != nil {
		t.Fatalf("archiving the same events again (a re-run compaction): %v", err)
	}
	raw, _ := inner.ReadArchived(ctx, "x", 0, -1)
	for _, e := range raw {
		if bytes.Contains(e.Payload, []byte("SECRET")) {
			t.Fatalf("archived #%d in plaintext: %s", e.Sequence, e.Payload)
		}
	}
	got, err := a.ReadArchived(ctx, "x", 0, -1)
	if err != nil || !reflect.DeepEqual(got, log[1:5]) {
		t.Fatalf("ReadArchived = %v, %v", got, err)
	}
	if _, err := s.EraseSubject(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	got, err = a.ReadArchived(ctx, "x", 0, -1)
	if err != nil {
		t.Fatalf("ReadArchived after erasure: %v", err)
	}
	if _, ok := crypto.IsShredded(json.RawMessage(mustMember(t, got[0].Payload, "input"))); !ok {
		t.Fatalf("archived input after erasure: %s", got[0].Payload)
	}
	if err := a.Archive(ctx, "x", log[5:7]); !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("archiving an erased subject's data: %v, want ErrKeyDestroyed", err)
	}
}

func mustMember(t *testing.T, payload json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}
