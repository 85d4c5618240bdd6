package sqlite

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/loom-kernel/loom/event"
)

func TestMetadataRoundTripsVerbatim(t *testing.T) {
	m := map[string]json.RawMessage{
		"kernel":       json.RawMessage(`true`),
		"spaced":       json.RawMessage(" { \"a\" : [ 1 , 2 ] } "),
		"string":       json.RawMessage(`"a,b}c\"d\\"`),
		"html":         json.RawMessage(`"<>&"`),
		"number":       json.RawMessage(`12345678901234567890`),
		"float":        json.RawMessage("1.0\n"),
		"nested":       json.RawMessage(`{"x":{"y":["}",{"z":"]"}]}}`),
		"quote\"key":   json.RawMessage(`null`),
		"ctl\x01key":   json.RawMessage(`-0`),
		"é日本😀":         json.RawMessage(`"é"`),
		"back\\slash":  json.RawMessage(`[]`),
		"empty-object": json.RawMessage(`{}`),
	}
	text := encodeMetadata(m)
	if !json.Valid([]byte(text)) {
		t.Fatalf("encoded metadata is not JSON: %s", text)
	}
	got, err := decodeMetadata(text)
	if err != nil {
		t.Fatalf("decode %s: %v", text, err)
	}
	if len(got) != len(m) {
		t.Fatalf("decoded %d keys, want %d", len(got), len(m))
	}
	for k, v := range m {
		if !bytes.Equal(got[k], v) {
			t.Errorf("key %q: got %q, want %q", k, got[k], v)
		}
	}
	if got, err := decodeMetadata(encodeMetadata(map[string]json.RawMessage{})); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty metadata decoded as %v, %v", got, err)
	}
}

func TestDecodeMetadataRefusesForeignText(t *testing.T) {
	for _, s := range []string{``, `{`, `[]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":"1}`, `{"a":[1}`} {
		if _, err := decodeMetadata(s); err == nil {
			t.Errorf("decodeMetadata(%q) succeeded", s)
		}
	}
}

// FuzzMetadataRoundTrip: every key and value event.Validate accepts comes
// back byte for byte.
func FuzzMetadataRoundTrip(f *testing.F) {
	f.Add("k", []byte(`1`), "k2", []byte(` {"a": "}"} `))
	f.Add("\"", []byte(`"\\\""`), "\\", []byte(`[ ]`))
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte) {
		m := map[string]json.RawMessage{k1: v1, k2: v2}
		e := event.Envelope{ID: "i", ExecutionID: "e", Type: "T", Metadata: m}
		if event.Validate(e, event.Limits{}) != nil {
			return
		}
		got, err := decodeMetadata(encodeMetadata(m))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		for k, v := range m {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("key %q: got %q, want %q", k, got[k], v)
			}
		}
		if len(got) != len(m) {
			t.Fatalf("got %d keys, want %d", len(got), len(m))
		}
	})
}
