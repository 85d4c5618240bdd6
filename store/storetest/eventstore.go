package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// EventStoreFactory builds the stores RunEventStore checks.
type EventStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it. It is called once
	// per subtest and may call t.Fatal (t.TempDir is the place for files).
	New func(t *testing.T) store.EventStore
	// Reopen is optional: it reopens the durable storage behind a store New
	// returned, after the kit closed it (file and database stores). When nil
	// the Reopen subtest is left out.
	Reopen func(t *testing.T, closed store.EventStore) store.EventStore
	// MaxPayloadBytes is the payload cap the store was built with; 0 means
	// event.DefaultMaxPayloadBytes.
	MaxPayloadBytes int
}

// eventKit carries the factory through the EventStore subtests.
type eventKit struct {
	f          EventStoreFactory
	payloadCap int
}

// RunEventStore runs the EventStore conformance kit against the stores f
// builds, one fresh store per named subtest: append and read ordering, read
// bounds, byte-exact round trips, every refusal of Append (typed, and writing
// nothing), concurrency, listing order and paging, then each optional
// capability (skipped, by name, when the store lacks it), Close, and Reopen
// when f.Reopen is set. See the package documentation for the contract.
func RunEventStore(t *testing.T, f EventStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: EventStoreFactory.New is nil")
	}
	k := eventKit{f: f, payloadCap: f.MaxPayloadBytes}
	if k.payloadCap <= 0 {
		k.payloadCap = event.DefaultMaxPayloadBytes
	}
	t.Run("AppendAndRead", k.appendAndRead)
	t.Run("ReadFromBounds", k.readFromBounds)
	t.Run("ReadRangeBounds", k.readRangeBounds)
	t.Run("EnvelopeFieldsRoundTrip", k.envelopeFieldsRoundTrip)
	t.Run("PayloadBytesVerbatim", k.payloadBytesVerbatim)
	t.Run("AbsentPayload", k.absentPayload)
	t.Run("LargePayload", k.largePayload)
	t.Run("PayloadAtCap", k.payloadAtCap)
	t.Run("CallerMutationIsolation", k.callerMutationIsolation)
	t.Run("Refusals", k.refusals)
	t.Run("ConcurrentAppendersDistinctExecutions", k.concurrentDistinct)
	t.Run("ConcurrentAppendersSameSequence", k.concurrentSameSequence)
	t.Run("ListEmpty", k.listEmpty)
	t.Run("ListPaging", k.listPaging)
	t.Run("Subscribe", k.subscribe)
	t.Run("CopyPrefix", k.copyPrefix)
	t.Run("CopyPrefixRefusals", k.copyPrefixRefusals)
	t.Run("DeleteExecution", k.deleteExecution)
	t.Run("Fencing", k.fencing)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: EventStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// open returns a fresh store for one subtest.
func (k eventKit) open(t *testing.T) store.EventStore {
	t.Helper()
	return openStore(t, "EventStoreFactory.New", k.f.New)
}

// appendAndRead: batches of several sizes read back as one ordered log, and
// logs of different executions do not mix.
func (k eventKit) appendAndRead(t *testing.T) {
	s := k.open(t)
	var want []event.Envelope
	next := int64(0)
	for _, n := range []int{1, 3, 1, 5} {
		b := batchAt("exec-a", next, n)
		mustAppend(t, s, "exec-a", next, b)
		want = append(want, b...)
		next += int64(n)
		assertLog(t, s, "exec-a", want)
	}
	other := batchAt("exec-b", 0, 2)
	mustAppend(t, s, "exec-b", 0, other)
	assertLog(t, s, "exec-a", want)
	assertLog(t, s, "exec-b", other)
	assertLog(t, s, "exec-unknown", nil)
}

// readFromBounds: ReadFrom returns exactly the events with sequence >= from.
func (k eventKit) readFromBounds(t *testing.T) {
	s := k.open(t)
	all := batchAt("exec-r", 0, 10)
	mustAppend(t, s, "exec-r", 0, all)
	ctx := context.Background()
	for _, from := range []int64{0, 1, 5, 9, 10, 11, 1000} {
		got, err := s.ReadFrom(ctx, "exec-r", from)
		if err != nil {
			t.Fatalf("ReadFrom(from %d): %v", from, err)
		}
		assertEvents(t, "ReadFrom(from "+itoa(from)+")", got, all[min(from, 10):])
	}
	got, err := s.ReadFrom(ctx, "exec-unknown", 0)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadFrom(unknown execution) = %d events, %v; want none, nil", len(got), err)
	}
}

// readRangeBounds: ReadRange returns exactly from <= sequence < to.
func (k eventKit) readRangeBounds(t *testing.T) {
	s := k.open(t)
	rr, ok := s.(store.RangeReader)
	if !ok {
		t.Skip("store does not implement store.RangeReader")
	}
	all := batchAt("exec-r", 0, 10)
	mustAppend(t, s, "exec-r", 0, all)
	cases := []struct{ from, to, wantFrom, wantTo int64 }{
		{0, 10, 0, 10}, {2, 5, 2, 5}, {0, 1, 0, 1}, {9, 10, 9, 10}, {0, 100, 0, 10},
		{5, 5, 0, 0}, {7, 3, 0, 0}, {10, 20, 0, 0}, {3, 4, 3, 4},
	}
	for _, c := range cases {
		got, err := rr.ReadRange(context.Background(), "exec-r", c.from, c.to)
		if err != nil {
			t.Fatalf("ReadRange(%d, %d): %v", c.from, c.to, err)
		}
		assertEvents(t, "ReadRange("+itoa(c.from)+", "+itoa(c.to)+")", got, all[c.wantFrom:c.wantTo])
	}
	got, err := rr.ReadRange(context.Background(), "exec-unknown", 0, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadRange(unknown execution) = %d events, %v; want none, nil", len(got), err)
	}
}

// envelopeFieldsRoundTrip: every field, metadata included, reads back as
// written; metadata values keep their text (digits, 1.0, <>& unescaped).
func (k eventKit) envelopeFieldsRoundTrip(t *testing.T) {
	s := k.open(t)
	e0 := event.Envelope{
		ID: "évt-0 <>&", WorkflowID: "wf/日本", ExecutionID: "exec-f", Type: event.ExecutionStarted,
		Sequence: 0, Timestamp: 0, Payload: json.RawMessage(`{}`),
	}
	e1 := event.Envelope{
		ID: "evt-1", WorkflowID: "", ExecutionID: "exec-f", Type: "user.Thing-Happened",
		Sequence: 1, Timestamp: 9_007_199_254_740_993, Payload: json.RawMessage(`[]`),
		Metadata: map[string]json.RawMessage{
			"kernel":   json.RawMessage(`true`),
			"flowEmit": json.RawMessage(`"0123456789abcdef"`),
			"big":      json.RawMessage(`12345678901234567890`),
			"float":    json.RawMessage(`1.0`),
			"html":     json.RawMessage(`"<>&"`),
			"unicode":  json.RawMessage(`"é日本😀"`),
			"nested":   json.RawMessage(`{"z":1,"a":[1.50,-0,2e10]}`),
			"null":     json.RawMessage(`null`),
		},
	}
	mustAppend(t, s, "exec-f", 0, []event.Envelope{e0, e1})
	assertLog(t, s, "exec-f", []event.Envelope{e0, e1})
	got := readAll(t, s, "exec-f")
	if !got[1].Kernel() {
		t.Fatal("metadata.kernel: true did not survive the round trip")
	}
	if d, ok := got[1].FlowEmit(); !ok || d != "0123456789abcdef" {
		t.Fatalf("metadata.flowEmit read back as %q, %v", d, ok)
	}
}

// payloadBytesVerbatim: payloads come back exactly as appended — whitespace,
// key order, duplicate keys, escapes, number text and <>& included.
func (k eventKit) payloadBytesVerbatim(t *testing.T) {
	s := k.open(t)
	payloads := []string{
		`{"big":12345678901234567890,"f":1.0,"e":1E+2,"neg":-0.0}`,
		`{"html":"<>&","esc":"\u00e9\"\\\/\n","raw":"é日本😀"}`,
		"{ \"z\" : 1 ,\n\t\"a\" : [ 1 , 2 ] }",
		`{"dup":1,"dup":2}`,
		`  [1, 2, 3]  `,
		`"just a string"`,
		`42`, `3.14159265358979323846264338327950288`, `null`, `true`, `false`,
		`{"deep":[[[[[[[[[[{"k":"v"}]]]]]]]]]]}`,
	}
	var want []event.Envelope
	for i, p := range payloads {
		e := envelopeAt("exec-p", int64(i))
		e.Payload = json.RawMessage(p)
		want = append(want, e)
	}
	mustAppend(t, s, "exec-p", 0, want[:4])
	mustAppend(t, s, "exec-p", 4, want[4:])
	assertLog(t, s, "exec-p", want)
}

// absentPayload: an envelope without a payload is accepted and reads back
// with no payload or the JSON null (both mean "absent").
func (k eventKit) absentPayload(t *testing.T) {
	s := k.open(t)
	e := envelopeAt("exec-n", 0)
	e.Payload = nil
	mustAppend(t, s, "exec-n", 0, []event.Envelope{e})
	got := readAll(t, s, "exec-n")
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	if p := string(got[0].Payload); p != "" && p != "null" {
		t.Fatalf("absent payload read back as %s, want nothing or null", excerpt(got[0].Payload))
	}
}

// largePayload: a 1 MiB payload (or the cap, if smaller) round-trips byte
// for byte, alone and among smaller events.
func (k eventKit) largePayload(t *testing.T) {
	s := k.open(t)
	size := min(1<<20, k.payloadCap)
	evs := batchAt("exec-l", 0, 3)
	evs[1].Payload = stringPayload(size)
	mustAppend(t, s, "exec-l", 0, evs)
	assertLog(t, s, "exec-l", evs)
}

// payloadAtCap: a payload of exactly the cap is accepted (the cap is
// inclusive); Refusals checks that one byte more is refused.
func (k eventKit) payloadAtCap(t *testing.T) {
	s := k.open(t)
	e := envelopeAt("exec-cap", 0)
	e.Payload = stringPayload(k.payloadCap)
	mustAppend(t, s, "exec-cap", 0, []event.Envelope{e})
	assertLog(t, s, "exec-cap", []event.Envelope{e})
}

// callerMutationIsolation: the store owns its copy. Mutating what was
// appended, or what a read returned, changes nothing stored.
func (k eventKit) callerMutationIsolation(t *testing.T) {
	s := k.open(t)
	fresh := func() []event.Envelope {
		evs := batchAt("exec-m", 0, 2)
		evs[1].Metadata = map[string]json.RawMessage{"k": json.RawMessage(`"v"`)}
		return evs
	}
	in := fresh()
	mustAppend(t, s, "exec-m", 0, in)
	in[0].Payload[1] = 'X'
	in[1].Metadata["k"][1] = 'X'
	in[1].Metadata["added"] = json.RawMessage(`1`)
	in[0].ID = "changed"
	assertLog(t, s, "exec-m", fresh())

	out := readAll(t, s, "exec-m")
	out[0].Payload[1] = 'Y'
	out[1].Metadata["k"][1] = 'Y'
	delete(out[1].Metadata, "k")
	out[1].Type = "changed"
	assertLog(t, s, "exec-m", fresh())
}
