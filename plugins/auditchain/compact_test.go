package auditchain_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/auditchain"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/store"
)

// TestChainCompactionMovesLinksIntoTheArchive compacts chained logs through
// the runtime: the archive holds the events with their links, so the whole
// history verifies with the same head as before; reads of the archive
// through the runtime show no member; the log goes on chaining after the
// compaction point; and a verify without the archive is refused by name.
func TestChainCompactionMovesLinksIntoTheArchive(t *testing.T) {
	ctx := testContext(t)
	opts := auditchain.Options{Key: testKey}
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "audit.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuditedApp(t, st.Events, st.Snapshots, st.Branches, st.Archive, st.Close, opts)
	defer a.close(t)
	a.runHistory(t)
	withArchive := opts
	withArchive.Archive = st.Archive

	before := mustVerify(t, a.events, "order-1", opts)
	stripped, err := a.events.ReadFrom(ctx, "order-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	const through = 4
	if res, err := a.rt.Compact(ctx, "order-1", through); err != nil || res.Archived != through {
		t.Fatalf("Compact = %+v, %v; want %d events archived", res, err, through)
	}
	after := mustVerify(t, a.events, "order-1", withArchive)
	if after.Length != before.Length || after.Head != before.Head {
		t.Fatalf("after compaction: %+v; before: %+v — want the same length and head", after, before)
	}
	archived, err := a.rt.ReadArchived(ctx, "order-1", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(archived, stripped[1:through+1]) {
		t.Fatalf("ReadArchived = %+v\nwant the events as the log read them: %+v", archived, stripped[1:through+1])
	}
	raw, err := st.Archive.ReadArchived(ctx, "order-1", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range raw {
		if _, ok := e.Metadata[auditchain.MetadataKey]; !ok {
			t.Fatalf("archived #%d carries no link", e.Sequence)
		}
	}

	// order-2 is parked: compact it, answer its gate, and the chain goes on.
	parked := mustVerify(t, a.events, "order-2", opts)
	if _, err := a.rt.Compact(ctx, "order-2", int64(parked.Length-2)); err != nil {
		t.Fatal(err)
	}
	a.answer(t, "order-2", true)
	if r := mustVerify(t, a.events, "order-2", withArchive); r.Length <= parked.Length {
		t.Fatalf("order-2 verified %d events after its answer, want more than the %d it had parked", r.Length, parked.Length)
	}

	_, err = auditchain.VerifyExecution(ctx, a.events, "order-1", opts)
	var ce *auditchain.CompactedLogError
	if !errors.As(err, &ce) || !ce.NoArchive || ce.Through != through {
		t.Fatalf("VerifyExecution without the archive = %v, want *CompactedLogError{Through: %d, NoArchive: true}", err, through)
	}
	other := opts
	other.Archive = emptyArchive{}
	if _, err := auditchain.VerifyExecution(ctx, a.events, "order-1", other); !errors.As(err, &ce) || ce.NoArchive {
		t.Fatalf("VerifyExecution with an archive holding none of it = %v, want *CompactedLogError", err)
	}
}

type emptyArchive struct{}

func (emptyArchive) Archive(context.Context, string, []event.Envelope) error { return nil }
func (emptyArchive) ReadArchived(context.Context, string, int64, int64) ([]event.Envelope, error) {
	return nil, nil
}

// TestChainCompactionRefusesAnUnwrappedArchive: a chained runtime whose
// Config.Archive is not auditchain.WrapArchive's cannot compact, and the
// refusal changes nothing — no archived event, no trim, no snapshot at the
// point. The wrapper's own Archive refuses events handed in from outside.
func TestChainCompactionRefusesAnUnwrappedArchive(t *testing.T) {
	ctx := testContext(t)
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "audit.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	events, err := auditchain.Wrap(st.Events, auditchain.Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Events: events, Snapshots: st.Snapshots, Archive: st.Archive, Flows: []*loom.Flow{auditFlow()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	}()
	a := &auditedApp{events: events, rt: rt, closeStore: func() error { return nil }}
	a.complete(t, "order-1")
	logBefore, _ := events.Inner().ReadFrom(ctx, "order-1", 0)
	snapsBefore, _ := st.Snapshots.(store.SnapshotLister).ListSequences(ctx, "order-1")

	_, err = rt.Compact(ctx, "order-1", 3)
	var le *store.ArchiveLayerError
	if !errors.As(err, &le) || le.Store != "auditchain.EventStore" {
		t.Fatalf("Compact into an unwrapped archive = %v, want *store.ArchiveLayerError", err)
	}
	if archived, _ := st.Archive.ReadArchived(ctx, "order-1", 0, -1); len(archived) != 0 {
		t.Fatalf("the refused compaction archived %d events", len(archived))
	}
	if trimmed, _ := events.TrimmedThrough(ctx, "order-1"); trimmed != 0 {
		t.Fatalf("the refused compaction trimmed the log through #%d", trimmed)
	}
	logAfter, _ := events.Inner().ReadFrom(ctx, "order-1", 0)
	snapsAfter, _ := st.Snapshots.(store.SnapshotLister).ListSequences(ctx, "order-1")
	if !reflect.DeepEqual(logAfter, logBefore) || !reflect.DeepEqual(snapsAfter, snapsBefore) {
		t.Fatalf("the refused compaction changed the log or the snapshots (%v → %v)", snapsBefore, snapsAfter)
	}

	wrapped, err := auditchain.WrapArchive(st.Archive)
	if err != nil {
		t.Fatal(err)
	}
	var ie *store.InvalidAppendError
	if err := wrapped.Archive(ctx, "order-1", logBefore[1:3]); !errors.As(err, &ie) {
		t.Fatalf("WrapArchive(...).Archive of outside events = %v, want *store.InvalidAppendError", err)
	}
	if archived, _ := st.Archive.ReadArchived(ctx, "order-1", 0, -1); len(archived) != 0 {
		t.Fatalf("the refused Archive wrote %d events", len(archived))
	}
}

// TestChainUnderEncryptionCompactsAndVerifies is the documented order,
// crypto(auditchain(store)), with compaction: the archive beneath both
// wrappers holds the sealed, chained bytes the log held; the runtime reads
// the archived history in plaintext; the whole history verifies from the
// raw stores without any data key, also after the subject is erased.
func TestChainUnderEncryptionCompactsAndVerifies(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(dir, "audit.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	keys, err := crypto.OpenFileKeyStore(filepath.Join(dir, "keys.json"), crypto.FileKeyStoreOptions{MasterKey: bytes.Repeat([]byte{7}, crypto.MasterKeyBytes)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = keys.Close() }()
	chained, err := auditchain.Wrap(st.Events, auditchain.Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := crypto.NewEventStore(chained, keys, crypto.EventStoreOptions{Subject: crypto.FixedSubject("customer-9")})
	if err != nil {
		t.Fatal(err)
	}
	chainedArchive, err := auditchain.WrapArchive(st.Archive)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := crypto.NewArchiveStore(chainedArchive, keys, sealed, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Events: sealed, Snapshots: st.Snapshots, Archive: archive, Flows: []*loom.Flow{auditFlow()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	}()
	a := &auditedApp{events: chained, rt: rt, closeStore: func() error { return nil }}
	a.complete(t, "order-1")
	plain, err := sealed.ReadFrom(ctx, "order-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := auditchain.Options{Key: testKey, Archive: st.Archive}
	before := mustVerify(t, st.Events, "order-1", opts)

	const through = 4
	if _, err := rt.Compact(ctx, "order-1", through); err != nil {
		t.Fatal(err)
	}
	archived, err := rt.ReadArchived(ctx, "order-1", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(archived, plain[1:through+1]) {
		t.Fatalf("ReadArchived through both wrappers = %+v\nwant the plaintext events %+v", archived, plain[1:through+1])
	}
	raw, err := st.Archive.ReadArchived(ctx, "order-1", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if sealedRows := countSealed(raw); sealedRows == 0 {
		t.Fatal("the archive beneath holds no sealed member: it must keep the log's sealed bytes")
	}
	if r := mustVerify(t, st.Events, "order-1", opts); r.Head != before.Head || r.Length != before.Length {
		t.Fatalf("compacted: %+v, before: %+v — want the same head and length", r, before)
	}
	if _, err := sealed.EraseSubject(ctx, "customer-9"); err != nil {
		t.Fatal(err)
	}
	if r := mustVerify(t, st.Events, "order-1", opts); r.Head != before.Head {
		t.Fatalf("after erasure the chain reads %+v, want the head %s", r, before.Head)
	}
}

// countSealed counts envelopes whose payload holds a sealed member.
func countSealed(evs []event.Envelope) int {
	n := 0
	for _, e := range evs {
		if strings.Contains(string(e.Payload), "loom:sealed:") {
			n++
		}
	}
	return n
}
