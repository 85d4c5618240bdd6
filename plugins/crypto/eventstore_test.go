package crypto_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/crypto"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

func env(exec string, seq int64, typ, payload string) event.Envelope {
	return event.Envelope{ID: exec + "-" + string(rune('a'+seq)), WorkflowID: "wf", ExecutionID: exec, Type: typ,
		Sequence: seq, Timestamp: 1000 + seq, Payload: json.RawMessage(payload)}
}

// sampleLog is a log with a member of every kind: data, frame, null, a
// duplicate key, odd whitespace, an application event.
func sampleLog(exec string) []event.Envelope {
	return []event.Envelope{
		env(exec, 0, event.ExecutionStarted, `{"input": {"user":"u1","ssn":"SECRET-0"} , "flowHash":"sha256:ab"}`),
		env(exec, 1, event.StepStarted, `{"stepId":"s1","input":"SECRET-1","attempt":1}`),
		env(exec, 2, event.StepCompleted, `{"stepId":"s1","output":{"v":"SECRET-2"}}`),
		env(exec, 3, event.StepCompleted, `{"stepId":"s2","output":null}`),
		env(exec, 4, event.DecisionRecorded, `{"decisionId":"d","choice":"SECRET-4","choice":"SECRET-4b"}`),
		env(exec, 5, event.ExecutionSuspended, `{"on":"gate"}`),
		env(exec, 6, event.ExecutionResumed, `{"eventType":"gate","payload":[1,"SECRET-6"]}`),
		env(exec, 7, "shop.ordered", `"SECRET-7"`),
		env(exec, 8, event.ExecutionCompleted, "{\n\t\"output\" : 12345678901234567890 }"),
	}
}

func newMemSealed(t *testing.T) (*crypto.EventStore, *memstore.EventStore, *crypto.FileKeyStore) {
	t.Helper()
	inner := memstore.NewEventStore()
	keys := openKeys(t, t.TempDir())
	return wrapEvents(t, inner, keys, crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user")}), inner, keys
}

func TestSealedLogRoundTripsByteForByte(t *testing.T) {
	s, inner, _ := newMemSealed(t)
	ctx := context.Background()
	log := sampleLog("x")
	if err := s.Append(ctx, "x", 0, log[:3]); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "x", 3, log[3:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, log) {
		t.Fatalf("read back differs:\n got %v\nwant %v", got, log)
	}
	raw, err := inner.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range raw {
		if bytes.Contains(e.Payload, []byte("SECRET")) {
			t.Fatalf("#%d stored in plaintext: %s", e.Sequence, e.Payload)
		}
	}
	seal := func(i int) (crypto.Seal, bool) {
		var s crypto.Seal
		m, ok := raw[i].Metadata[crypto.SealMetadataKey]
		return s, ok && json.Unmarshal(m, &s) == nil
	}
	if sl, ok := seal(0); !ok || sl.Subject != "u1" || sl.Cipher != crypto.Cipher || !reflect.DeepEqual(sl.Covers, []string{"input"}) {
		t.Fatalf("seal of #0 = %+v, %v", sl, ok)
	}
	for i, want := range map[int][]string{1: {"input"}, 2: {"output"}, 4: {"choice"}, 6: {"payload"}, 7: {crypto.WholePayload}, 8: {"output"}} {
		if sl, ok := seal(i); !ok || !reflect.DeepEqual(sl.Covers, want) {
			t.Fatalf("seal of #%d = %+v, want covers %v", i, sl, want)
		}
	}
	for _, i := range []int{3, 5} {
		if _, ok := raw[i].Metadata[crypto.SealMetadataKey]; ok || !bytes.Equal(raw[i].Payload, log[i].Payload) {
			t.Fatalf("#%d has no data but was sealed: %s", i, raw[i].Payload)
		}
	}
	if !bytes.Contains(raw[1].Payload, []byte(`"stepId":"s1"`)) || !bytes.Contains(raw[1].Payload, []byte(`"attempt":1`)) {
		t.Fatalf("the frame of #1 is not readable: %s", raw[1].Payload)
	}
}

// copyRaw writes evs (already sealed) into a fresh inner store and wraps it
// with keys, so a test can edit stored rows.
func copyRaw(t *testing.T, keys crypto.KeyStore, exec string, evs []event.Envelope) *crypto.EventStore {
	t.Helper()
	inner := memstore.NewEventStore()
	if err := inner.Append(context.Background(), exec, 0, evs); err != nil {
		t.Fatal(err)
	}
	return wrapEvents(t, inner, keys, crypto.EventStoreOptions{Subject: crypto.SubjectFromInput("user")})
}

func TestTamperedSealsAreSealErrors(t *testing.T) {
	s, inner, keys := newMemSealed(t)
	ctx := context.Background()
	if err := s.Append(ctx, "x", 0, sampleLog("x")); err != nil {
		t.Fatal(err)
	}
	raw, _ := inner.ReadFrom(ctx, "x", 0)
	edits := map[string]func(evs []event.Envelope){
		"flipped byte": func(evs []event.Envelope) {
			p := []byte(evs[2].Payload)
			i := bytes.Index(p, []byte("loom:sealed:v1:")) + 20
			p[i] ^= 1
		},
		"value moved to another sequence": func(evs []event.Envelope) {
			evs[1].Payload = json.RawMessage(strings.Replace(string(evs[1].Payload), extractToken(evs[1].Payload), extractToken(evs[8].Payload), 1))
		},
		"member renamed": func(evs []event.Envelope) {
			evs[8].Payload = json.RawMessage(strings.Replace(string(evs[8].Payload), `"output"`, `"outputs"`, 1))
			evs[8].Metadata[crypto.SealMetadataKey] = json.RawMessage(strings.Replace(string(evs[8].Metadata[crypto.SealMetadataKey]), `"output"`, `"outputs"`, 1))
		},
		"other subject named": func(evs []event.Envelope) {
			evs[2].Metadata[crypto.SealMetadataKey] = json.RawMessage(strings.Replace(string(evs[2].Metadata[crypto.SealMetadataKey]), `"u1"`, `"u2"`, 1))
		},
		"malformed seal": func(evs []event.Envelope) {
			evs[2].Metadata[crypto.SealMetadataKey] = json.RawMessage(`{"v":9}`)
		},
	}
	for name, edit := range edits {
		evs, _ := inner.ReadFrom(ctx, "x", 0) // a fresh copy
		edit(evs)
		got := copyRaw(t, keys, "x", evs)
		_, err := got.ReadFrom(ctx, "x", 0)
		var se *crypto.SealError
		if !errors.As(err, &se) || !errors.Is(err, crypto.ErrSeal) {
			t.Fatalf("%s: read = %v, want *SealError", name, err)
		}
	}
	// The same rows under another keystore (another master key) do not
	// open either: typed, never a marker.
	otherKeys, err := crypto.OpenFileKeyStore(filepath.Join(t.TempDir(), "k.json"),
		crypto.FileKeyStoreOptions{MasterKey: bytes.Repeat([]byte{9}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = copyRaw(t, otherKeys, "x", raw).ReadFrom(ctx, "x", 0)
	if !errors.Is(err, crypto.ErrSeal) || !errors.Is(err, crypto.ErrKeyNotFound) {
		t.Fatalf("read under another keystore = %v, want *SealError wrapping ErrKeyNotFound", err)
	}
}

func extractToken(p []byte) string {
	i := bytes.Index(p, []byte(`"loom:sealed:v1:`))
	j := bytes.IndexByte(p[i+1:], '"')
	return string(p[i : i+j+2])
}

func TestErasedSubjectReadsAsMarkers(t *testing.T) {
	s, inner, _ := newMemSealed(t)
	ctx := context.Background()
	log := sampleLog("x")
	if err := s.Append(ctx, "x", 0, log); err != nil {
		t.Fatal(err)
	}
	other := sampleLog("y")
	other[0].Payload = json.RawMessage(`{"input":{"user":"u2","ssn":"SECRET-y"}}`)
	if err := s.Append(ctx, "y", 0, other); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "plain", 0, []event.Envelope{env("plain", 0, event.ExecutionStarted, `{"input":{"n":1}}`)}); err != nil {
		t.Fatal(err)
	}
	if sub, err := s.SubjectOf(ctx, "plain"); err != nil || sub != "" {
		t.Fatalf("SubjectOf(plain) = %q, %v: an input without a user is not sealed", sub, err)
	}
	erasure, err := s.EraseSubject(ctx, "u1")
	if err != nil || len(erasure.Executions) != 1 || erasure.Executions[0] != "x" {
		t.Fatalf("EraseSubject = %+v, %v", erasure, err)
	}
	got, err := s.ReadFrom(ctx, "x", 0)
	if err != nil {
		t.Fatalf("read of an erased subject: %v", err)
	}
	marker := `{"$shredded":true,"subject":"u1","keyId":"` + erasure.Proof.KeyID + `"}`
	want := map[int64]string{
		0: `{"input": ` + marker + ` , "flowHash":"sha256:ab"}`,
		1: `{"stepId":"s1","input":` + marker + `,"attempt":1}`,
		3: `{"stepId":"s2","output":null}`,
		4: `{"decisionId":"d","choice":` + marker + `,"choice":` + marker + `}`,
		7: marker,
		8: "{\n\t\"output\" : " + marker + " }",
	}
	for seq, w := range want {
		if string(got[seq].Payload) != w {
			t.Fatalf("#%d reads %s, want %s", seq, got[seq].Payload, w)
		}
		if !json.Valid(got[seq].Payload) {
			t.Fatalf("#%d is not valid JSON", seq)
		}
	}
	if _, ok := crypto.IsShredded(got[7].Payload); !ok {
		t.Fatal("IsShredded(marker) = false")
	}
	if y, err := s.ReadFrom(ctx, "y", 0); err != nil || !reflect.DeepEqual(y, other) {
		t.Fatalf("another subject's log changed: %v", err)
	}
	// A data append is refused, nothing written; a frame-only one is not.
	before, _ := inner.ReadFrom(ctx, "x", 0)
	err = s.Append(ctx, "x", 9, []event.Envelope{env("x", 9, "shop.refunded", `{"amount":3}`)})
	if !errors.Is(err, crypto.ErrKeyDestroyed) {
		t.Fatalf("data append to an erased subject = %v, want ErrKeyDestroyed", err)
	}
	if after, _ := inner.ReadFrom(ctx, "x", 0); len(after) != len(before) {
		t.Fatal("a refused append wrote")
	}
	if err := s.Append(ctx, "x", 9, []event.Envelope{env("x", 9, event.PayloadShredded, `{"subject":"u1"}`)}); err != nil {
		t.Fatalf("PAYLOAD_SHREDDED after erasure: %v", err)
	}
	// A fork of an erased execution copies its sealed bytes: still shredded.
	if err := s.CopyPrefix(ctx, "x", "x-fork", 2); err != nil {
		t.Fatal(err)
	}
	fork, err := s.ReadFrom(ctx, "x-fork", 0)
	if err != nil || string(fork[1].Payload) != want[1] {
		t.Fatalf("fork of an erased execution: %v, %s", err, fork[1].Payload)
	}
}

func TestForkCarriesSealedBytesAndItsSubject(t *testing.T) {
	s, inner, keys := newMemSealed(t)
	ctx := context.Background()
	log := sampleLog("x")
	if err := s.Append(ctx, "x", 0, log); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyPrefix(ctx, "x", "fork", 4); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadFrom(ctx, "fork", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		w := log[i]
		w.ExecutionID = "fork"
		if !reflect.DeepEqual(got[i], w) {
			t.Fatalf("fork #%d = %+v, want %+v", i, got[i], w)
		}
	}
	if sub, err := s.SubjectOf(ctx, "fork"); err != nil || sub != "u1" {
		t.Fatalf("SubjectOf(fork) = %q, %v", sub, err)
	}
	raw, _ := inner.ReadFrom(ctx, "fork", 0)
	src, _ := inner.ReadFrom(ctx, "x", 0)
	if !bytes.Equal(raw[1].Payload, src[1].Payload) {
		t.Fatal("the fork's sealed bytes differ from its parent's: CopyPrefix copies bytes")
	}
	if execs, err := s.ExecutionsOf(ctx, "u1"); err != nil || !reflect.DeepEqual(execs, []string{"fork", "x"}) {
		t.Fatalf("ExecutionsOf(u1) = %v, %v: the fork holds the subject too", execs, err)
	}

	// A sealed row moved whole into another subject's execution does not
	// open: the seal names u1, the execution is u2's.
	y := []event.Envelope{env("y", 0, event.ExecutionStarted, `{"input":{"user":"u2"}}`)}
	if err := s.Append(ctx, "y", 0, y); err != nil {
		t.Fatal(err)
	}
	rawY, _ := inner.ReadFrom(ctx, "y", 0)
	moved := src[1]
	moved.ExecutionID = "y"
	target := copyRaw(t, keys, "y", append(rawY, moved))
	if _, err := target.ReadFrom(ctx, "y", 0); !errors.Is(err, crypto.ErrSeal) {
		t.Fatalf("a row moved into another subject's execution: %v, want *SealError", err)
	}
}

func TestNewEventStoreRefusals(t *testing.T) {
	keys := openKeys(t, t.TempDir())
	var mc *crypto.MissingCapabilityError
	if _, err := crypto.NewEventStore(bareStore{memstore.NewEventStore()}, keys, crypto.EventStoreOptions{Subject: crypto.FixedSubject("s")}); !errors.As(err, &mc) {
		t.Fatalf("a store without capabilities: %v, want *MissingCapabilityError", err)
	}
	if _, err := crypto.NewEventStore(memstore.NewEventStore(), keys, crypto.EventStoreOptions{}); err == nil {
		t.Fatal("no SubjectFunc accepted")
	}
	s := wrapEvents(t, memstore.NewEventStore(), keys, crypto.EventStoreOptions{Subject: crypto.FixedSubject("s")})
	e := env("x", 0, event.ExecutionStarted, `{"input":1}`)
	e.Metadata = map[string]json.RawMessage{"seal": json.RawMessage(`{}`)}
	var ia *store.InvalidAppendError
	if err := s.Append(context.Background(), "x", 0, []event.Envelope{e}); !errors.As(err, &ia) {
		t.Fatalf("an envelope carrying metadata.seal: %v, want *store.InvalidAppendError", err)
	}
	bad := wrapEvents(t, memstore.NewEventStore(), keys, crypto.EventStoreOptions{Subject: crypto.FixedSubject("a\x00b")})
	if err := bad.Append(context.Background(), "x", 0, []event.Envelope{env("x", 0, event.ExecutionStarted, `{}`)}); !errors.As(err, &ia) {
		t.Fatalf("an invalid subject: %v, want *store.InvalidAppendError", err)
	}
}

// bareStore hides every optional capability of its store.
type bareStore struct{ store.EventStore }

func TestDefaultFieldTable(t *testing.T) {
	f := crypto.DefaultFields()
	want := map[string][]string{
		event.ExecutionStarted: {"input"}, event.ExecutionResumed: {"payload"}, event.ExecutionCompleted: {"output"},
		event.ExecutionFailed: {"error"}, event.ExecutionMigrated: {"migratedInput"}, event.StepStarted: {"input"},
		event.StepCompleted: {"output"}, event.StepFailed: {"error", "payload"}, event.StepRetrying: {"error"},
		event.DecisionRecorded: {"choice", "context"}, event.OutcomeRecorded: {"outcome", "recordedBy"},
		event.MessageConsumed: {"payload"}, "__loom_message__": {crypto.WholePayload},
	}
	if !reflect.DeepEqual(f.ByType, want) || !f.AppEvents {
		t.Fatalf("DefaultFields changed: %v (AppEvents %v); update docs/encryption.md with it", f.ByType, f.AppEvents)
	}
	for _, typ := range event.KnownTypes() {
		if _, sealed := want[typ]; !sealed && f.For(typ) != nil {
			t.Fatalf("kernel type %s seals %v: it carries only frame", typ, f.For(typ))
		}
	}
	if got := f.For("agent.turn"); !reflect.DeepEqual(got, []string{crypto.WholePayload}) {
		t.Fatalf("an application event seals %v, want the whole payload", got)
	}
	if got := f.For("__loom_lifecycle__"); got != nil {
		t.Fatalf("a reserved kernel type seals %v", got)
	}
}

func TestSubscribeDeliversOpenedEvents(t *testing.T) {
	s, _, _ := newMemSealed(t)
	ctx := context.Background()
	log := sampleLog("x")
	if err := s.Append(ctx, "x", 0, log[:2]); err != nil {
		t.Fatal(err)
	}
	sn, err := s.Subscribe(ctx, "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	if err := s.Append(ctx, "x", 2, log[2:]); err != nil {
		t.Fatal(err)
	}
	for i := range log {
		e, ok := <-sn.Events()
		if !ok || !reflect.DeepEqual(e, log[i]) {
			t.Fatalf("delivery %d = %+v, %v; want %+v", i, e, ok, log[i])
		}
	}
}
