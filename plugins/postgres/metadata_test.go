package postgres

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Metadata values keep their text through the column: HTML characters,
// line separators, escapes and number text are not rewritten; only
// insignificant whitespace goes.
func TestMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	in := map[string]json.RawMessage{
		"html":      json.RawMessage(`"<>&"`),
		"sep":       json.RawMessage("\"a\u2028b\u2029c\""),
		"escapes":   json.RawMessage(`"\u00e9\"\\\/\n"`),
		"big":       json.RawMessage(`12345678901234567890`),
		"float":     json.RawMessage(`1.0`),
		"exp":       json.RawMessage(`-0.0e+10`),
		"nested":    json.RawMessage(`{ "z" : 1, "a" : [ 1.50 , -0 ] }`),
		"null":      json.RawMessage(`null`),
		"key \"q\"": json.RawMessage(`true`),
		"ключ":      json.RawMessage(`"日本😀"`),
	}
	s, err := encodeMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeMetadata(s)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if len(out) != len(in) {
		t.Fatalf("decoded %d keys, want %d", len(out), len(in))
	}
	for k, v := range in {
		var want bytes.Buffer
		if err := json.Compact(&want, v); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[k], want.Bytes()) {
			t.Errorf("metadata %q read back as %s, want %s", k, out[k], want.Bytes())
		}
	}
	empty, err := encodeMetadata(map[string]json.RawMessage{})
	if err != nil || empty != "{}" {
		t.Fatalf("empty metadata encodes as %q, %v", empty, err)
	}
	if _, err := decodeMetadata("{"); err == nil {
		t.Fatal("a corrupt column decoded")
	}
}
