package fold

import (
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
)

// logBuilder writes test logs tersely: sequences and timestamps are
// assigned in order, payloads are JSON text.
type logBuilder struct {
	evs []event.Envelope
}

func newLog() *logBuilder { return &logBuilder{} }

func (l *logBuilder) envelope(typ, payload string, meta map[string]json.RawMessage) *logBuilder {
	seq := int64(len(l.evs))
	var p json.RawMessage
	if payload != "" {
		p = json.RawMessage(payload)
	}
	l.evs = append(l.evs, event.Envelope{
		ID: "ev-" + string(rune('a'+seq%26)) + itoa(seq), WorkflowID: "wf", ExecutionID: "ex-1",
		Type: typ, Sequence: seq, Timestamp: 1000 + seq, Payload: p, Metadata: meta,
	})
	return l
}

// add appends an application- or kernel-written event without stamps.
func (l *logBuilder) add(typ, payload string) *logBuilder { return l.envelope(typ, payload, nil) }

// kernel appends an event stamped metadata.kernel: true.
func (l *logBuilder) kernel(typ, payload string) *logBuilder {
	return l.envelope(typ, payload, map[string]json.RawMessage{"kernel": json.RawMessage("true")})
}

// emit appends an event stamped with a flowEmit digest.
func (l *logBuilder) emit(typ, payload, digest string) *logBuilder {
	d, _ := json.Marshal(digest)
	return l.envelope(typ, payload, map[string]json.RawMessage{"flowEmit": d})
}

func (l *logBuilder) started() *logBuilder {
	return l.add(event.ExecutionStarted, `{"input":{"n":1},"flowHash":"sha256:ab"}`)
}

func (l *logBuilder) fold() State { return Fold(l.evs) }

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustEncode(t fataler, s State) string {
	t.Helper()
	b, err := Encode(s)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return string(b)
}

func wantStatus(t *testing.T, s State, want Status) {
	t.Helper()
	if s.Status != want {
		t.Fatalf("status = %q, want %q", s.Status, want)
	}
}

// sameBesidesClock asserts two states are equal ignoring Sequence and
// UpdatedAt, which every event advances.
func sameBesidesClock(t *testing.T, got, want State) {
	t.Helper()
	got.Sequence, got.UpdatedAt = 0, 0
	want.Sequence, want.UpdatedAt = 0, 0
	if g, w := mustEncode(t, got), mustEncode(t, want); g != w {
		t.Fatalf("state changed:\n got  %s\n want %s", g, w)
	}
}
