package event_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
)

func TestFNV1a64(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "cbf29ce484222325"}, // the offset basis
		{"a", "af63dc4c8601ec8c"},
		{"foobar", "85944171f73967e8"},
	} {
		if got := event.FNV1a64([]byte(tc.in)); got != tc.want {
			t.Errorf("FNV1a64(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestSHA256(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := event.SHA256([]byte(tc.in)); got != tc.want {
			t.Errorf("SHA256(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDigestCanonical(t *testing.T) {
	a, err := event.DigestCanonical([]byte(`{"b": [1.0, "x"], "a": null}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := event.DigestCanonical([]byte(`{"a":null,"b":[1,"x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("equal documents digest differently: %s vs %s", a, b)
	}
	if want := event.SHA256([]byte(`{"a":null,"b":[1,"x"]}`)); a != want {
		t.Errorf("DigestCanonical = %s, want SHA256 of the canonical form %s", a, want)
	}
	if _, err := event.DigestCanonical([]byte(`{"a":`)); !errors.Is(err, event.ErrNotCanonicalizable) {
		t.Errorf("DigestCanonical of invalid JSON: err = %v, want ErrNotCanonicalizable", err)
	}
}

// TestSpec3FlowEmitIdentity checks the ADR 0102 formula of spec §3:
// d = fnv1a64(segment | canonical JSON of [eventType, payload]).
func TestSpec3FlowEmitIdentity(t *testing.T) {
	d, err := event.FlowEmitDigest(2, "NOTE_TAKEN", json.RawMessage(`{ "z": [1.0, 2], "a": "é" }`))
	if err != nil {
		t.Fatal(err)
	}
	if want := event.FNV1a64([]byte(`2|["NOTE_TAKEN",{"a":"é","z":[1,2]}]`)); d != want {
		t.Fatalf("FlowEmitDigest = %s, want %s", d, want)
	}
	// Pinned so that a change of the formula or the canonical form shows up
	// as a failing digest, not only as a self-consistent one.
	if d != "a4a35b202e1266c7" {
		t.Fatalf("FlowEmitDigest = %s, pinned a4a35b202e1266c7", d)
	}
}

func TestFlowEmitDigestIgnoresKeyOrderAndWhitespace(t *testing.T) {
	payloads := []string{
		`{"a":1,"b":{"c":[true,null],"d":"x"}}`,
		`{"b":{"d":"x","c":[true,null]},"a":1}`,
		"{ \"b\" : { \"d\" : \"x\" , \"c\" : [ true , null ] } ,\n \"a\" : 1.0 }",
	}
	want, err := event.FlowEmitDigest(0, "NOTE", json.RawMessage(payloads[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads[1:] {
		got, err := event.FlowEmitDigest(0, "NOTE", json.RawMessage(p))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("FlowEmitDigest(%s) = %s, want %s (same content)", p, got, want)
		}
	}
}

func TestFlowEmitDigestSeparatesSegmentsAndTypes(t *testing.T) {
	payload := json.RawMessage(`{"n":1}`)
	seen := map[string]string{}
	for _, seg := range []int{0, 1, 2, 10} {
		for _, typ := range []string{"NOTE", "NOTE2", "UI_RENDERED"} {
			d, err := event.FlowEmitDigest(seg, typ, payload)
			if err != nil {
				t.Fatal(err)
			}
			key := strconv.Itoa(seg) + "/" + typ
			if prev, dup := seen[d]; dup {
				t.Errorf("%s and %s share digest %s", prev, key, d)
			}
			seen[d] = key
		}
	}
	other, _ := event.FlowEmitDigest(0, "NOTE", json.RawMessage(`{"n":2}`))
	if _, dup := seen[other]; dup {
		t.Error("a different payload gave a digest already seen")
	}
}

func TestFlowEmitDigestAbsentPayloadIsNull(t *testing.T) {
	a, err := event.FlowEmitDigest(0, "NOTE", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := event.FlowEmitDigest(0, "NOTE", json.RawMessage("null"))
	if a != b {
		t.Errorf("absent payload %s differs from null %s", a, b)
	}
}

// TestSpec3UnmatchablePayloadRefused: a payload with no JSON form returns
// ErrNotCanonicalizable (the emit is then appended unstamped). `1,2` is the
// regression for a payload that completed the [type, payload] pair into
// valid JSON and so was digested as if the emit had three elements.
func TestSpec3UnmatchablePayloadRefused(t *testing.T) {
	for _, p := range []string{`{`, `1,2`, `{"a":1},{"b":2}`, `]`, "\"\xff\"", `NaN`} {
		d, err := event.FlowEmitDigest(0, "NOTE", json.RawMessage(p))
		if !errors.Is(err, event.ErrNotCanonicalizable) {
			t.Errorf("FlowEmitDigest(%q) = %q, %v; want ErrNotCanonicalizable", p, d, err)
		}
	}
	if _, err := event.FlowEmitDigest(0, "NO\xffTE", json.RawMessage(`1`)); !errors.Is(err, event.ErrNotCanonicalizable) {
		t.Errorf("an event type that is not UTF-8: err = %v, want ErrNotCanonicalizable", err)
	}
	if d, err := event.FlowEmitDigest(0, strings.Repeat("<&>", 3), json.RawMessage(`1`)); err != nil || len(d) != 16 {
		t.Errorf("an event type with HTML characters: %q, %v", d, err)
	}
}
