package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
)

// FuzzDecode: Decode takes outside input, so it must never panic; every
// refusal is an ErrInvalidEnvelope; an accepted envelope encodes, decodes
// back equal, and encodes to the same bytes again.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		validEnvelope,
		`{"id":"e","executionId":"x","eventType":"T","sequence":0}`,
		`{"id":"e","executionId":"x","eventType":"T","sequence":0,"payload":{ "b" : [1.0, 2e3],` + "\n" + `"a":"\u2028<&>"}}`,
		`{"id":"e","workflowId":null,"executionId":"x","eventType":"T","sequence":9007199254740993,"timestamp":null,"payload":null,"metadata":{}}`,
		`{"id":"e","executionId":"x","eventType":"T","sequence":0,"metadata":{"kernel":true,"flowEmit":"af63dc4c8601ec8c","seal":{"v":1}}}`,
		`{"id":"e\u0000","executionId":"x","eventType":"T","sequence":0}`,
		`{"ID":"e","executionId":"x","eventType":"T","sequence":0}`,
		`{"id":"e","id":"f","executionId":"x","eventType":"T","sequence":0}`,
		`{"id":"e","executionId":"x","eventType":"T","sequence":0}]`,
		`{"id":"e","executionId":"x","eventType":"T","sequence":-1}`,
		`{"id":"\ud800","executionId":"x","eventType":"T","sequence":0,"payload":"\ud800"}`,
		`[]`, `null`, `{}`, ``, `{"id":`,
	} {
		f.Add([]byte(seed))
	}
	lim := event.Limits{MaxPayloadBytes: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := event.Decode(data, lim)
		if err != nil {
			if !errors.Is(err, event.ErrInvalidEnvelope) {
				t.Fatalf("refusal %v (%T) is not an ErrInvalidEnvelope", err, err)
			}
			return
		}
		b, err := event.Encode(e)
		if err != nil {
			t.Fatalf("Encode of a decoded envelope: %v", err)
		}
		e2, err := event.Decode(b, lim)
		if err != nil {
			t.Fatalf("Decode(Encode(e)) = %v\nencoded %q", err, b)
		}
		if !reflect.DeepEqual(normalize(e), normalize(e2)) {
			t.Fatalf("round trip changed the envelope:\nfirst  %+v\nsecond %+v", e, e2)
		}
		b2, err := event.Encode(e2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("Encode is not stable: %q then %q (%v)", b, b2, err)
		}
	})
}

// normalize maps the encodings Encode documents as equal onto one: an
// absent payload is null, empty metadata is absent.
func normalize(e event.Envelope) event.Envelope {
	e.Payload = e.PayloadOrNull()
	if len(e.Metadata) == 0 {
		e.Metadata = nil
	}
	return e
}

// FuzzCanonical: Canonical must never panic, refuses only input that is not
// UTF-8 JSON, and on success returns valid JSON that is its own canonical
// form and means the same as the input (numbers compared as float64).
func FuzzCanonical(f *testing.F) {
	for _, tc := range canonCases {
		f.Add([]byte(tc.in))
	}
	for _, seed := range []string{
		`{"a":[{"b":{"c":[]}}],"a":0}`, `[1e-400,1e400,-0,0.0,1E+2]`, `"\ud800\udc00\udbff\udfff\ud800"`,
		`{"\ud800":1,"\udc00":2,"\ue000":3}`, `[` + strconv.Quote("\x7f\u2028") + `]`, "\"\xff\"", `{"a"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := event.Canonical(data)
		if err != nil {
			if !errors.Is(err, event.ErrNotCanonicalizable) {
				t.Fatalf("refusal %v is not ErrNotCanonicalizable", err)
			}
			if utf8.Valid(data) && json.Valid(data) {
				t.Fatalf("refused valid JSON %q", data)
			}
			return
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("Canonical(%q) = %q is not UTF-8 JSON", data, out)
		}
		again, err := event.Canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", data, out, again, err)
		}
		// encoding/json reads every lone surrogate as U+FFFD, which merges
		// keys Canonical keeps apart, so it cannot judge such input.
		if len(data) == 0 || bytes.Contains(bytes.ToLower(data), []byte(`\ud`)) {
			return
		}
		in, canon := decodeNumbers(t, data), decodeNumbers(t, out)
		if !sameJSON(in, canon) {
			t.Fatalf("Canonical changed the meaning: %q -> %q", data, out)
		}
	})
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// sameJSON compares decoded values, numbers by their float64 value (a
// literal out of float64 range is kept verbatim, so compares as text).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		fa, errA := strconv.ParseFloat(string(a), 64)
		fb, errB := strconv.ParseFloat(string(b), 64)
		if errA != nil || errB != nil {
			return a == b
		}
		return fa == fb
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if !sameJSON(v, b[k]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

// FuzzEncodeStrings: Encode writes ids, types and metadata keys exactly as
// encoding/json (HTML escaping off) would, whatever bytes they hold, and
// EncodeValid writes the same bytes as Encode.
func FuzzEncodeStrings(f *testing.F) {
	for _, s := range []string{"exec-1", "a\"b\\c", "tab\there", "\u2028", "é", "\xff", "<&>", "\x7f", ""} {
		f.Add(s, s+"k", int64(7), int64(-3))
	}
	f.Fuzz(func(t *testing.T, s, key string, seq, ts int64) {
		e := event.Envelope{ID: s, WorkflowID: s + "w", ExecutionID: s, Type: s, Sequence: seq, Timestamp: ts,
			Payload: json.RawMessage(`{"a":1}`), Metadata: map[string]json.RawMessage{key: json.RawMessage(`true`)}}
		got, err := event.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		str := func(v string) string {
			want.Reset()
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			return string(bytes.TrimSuffix(want.Bytes(), []byte("\n")))
		}
		ref := `{"id":` + str(e.ID) + `,"workflowId":` + str(e.WorkflowID) + `,"executionId":` + str(e.ExecutionID) +
			`,"eventType":` + str(e.Type) + `,"sequence":` + strconv.FormatInt(seq, 10) + `,"timestamp":` + strconv.FormatInt(ts, 10) +
			`,"payload":{"a":1},"metadata":{` + str(key) + `:true}}`
		if string(got) != ref {
			t.Fatalf("Encode wrote\n%s\nencoding/json would write\n%s", got, ref)
		}
		if valid := event.EncodeValid(e); !bytes.Equal(valid, got) {
			t.Fatalf("EncodeValid wrote %s, Encode %s", valid, got)
		}
	})
}
