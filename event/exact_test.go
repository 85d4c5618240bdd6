package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// unmarshalStrict is the decoder's own strict default, for comparison.
func unmarshalStrict(data []byte, v any) error { return jsonv2.Unmarshal(data, v) }

// exactProbe has every field shape the fold decodes recorded payloads into.
type exactProbe struct {
	StepID  string                     `json:"stepId"`
	Attempt *int64                     `json:"attempt"`
	Count   int64                      `json:"count"`
	Late    bool                       `json:"late"`
	Tokens  *float64                   `json:"tokens"`
	Input   json.RawMessage            `json:"input"`
	Custom  map[string]float64         `json:"custom"`
	Fields  map[string]json.RawMessage `json:"fields"`
	Nested  *exactNested               `json:"nested"`
	List    []exactNested              `json:"list"`
	ByName  map[string]exactNested     `json:"byName"`
	Ignored string                     `json:"-"`
	Plain   string
}

type exactNested struct {
	A int64           `json:"a"`
	R json.RawMessage `json:"r,omitempty"`
}

// TestUnmarshalExactMatchesEncodingJSONOnWellFormedInput: where member names
// are spelled exactly, given once and every string is valid, UnmarshalExact
// and encoding/json decode to the same value.
func TestUnmarshalExactMatchesEncodingJSONOnWellFormedInput(t *testing.T) {
	for _, in := range []string{
		`{"stepId":"s","attempt":2,"input":{ "a" : [1, 2.50] },"count":7}`,
		`{"stepId":"s","attempt":0,"count":0,"late":false}`,
		`{"stepId":null,"attempt":null,"input":null,"custom":null,"fields":null,"nested":null,"list":null,"byName":null}`,
		`{"tokens":1.5e3,"late":true,"custom":{"gpu":1.5,"":2},"fields":{"a":null,"b":[1,{"c":2}]}}`,
		`{"nested":{"a":1,"r":"x"},"list":[{"a":2},{"a":3,"r":null}],"byName":{"x":{"a":4}}}`,
		`{"stepId":"s","extra":{"deep":[1,2,{"e":null}]},"Ignored":"no","-":"dash"}`,
		`{"stepId":"\u00e9\ud83d\ude00é","input":"\ud83d\ude00"}`,
		`{"input":12345678901234567890,"fields":{"big":1e400}}`,
		`{"step\u0049d":"escaped name","Plain":"go name"}`,
		`{"list":[],"byName":{},"custom":{},"input":[]}`,
		` {"stepId":"ws"} `,
		`{}`,
		`null`,
	} {
		var want, got exactProbe
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("encoding/json refuses %s: %v", in, err)
		}
		if err := UnmarshalExact([]byte(in), &got); err != nil {
			t.Errorf("UnmarshalExact(%s) = %v", in, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("UnmarshalExact(%s)\n got  %+v\n want %+v", in, got, want)
		}
	}
	for _, in := range []string{`{"a":null,"b":{"c":1}}`, `{}`, `null`} {
		var want, got map[string]json.RawMessage
		_ = json.Unmarshal([]byte(in), &want)
		if err := UnmarshalExact([]byte(in), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("map: UnmarshalExact(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestUnmarshalExactDepartsFromEncodingJSON: misspelled names are unknown,
// repeated names and bad strings are refused, each with its reason; *v is
// zero after any refusal.
func TestUnmarshalExactDepartsFromEncodingJSON(t *testing.T) {
	str := func(s string) *exactProbe { return &exactProbe{StepID: s} }
	for _, c := range []struct {
		name, in string
		want     *exactProbe   // the decoded value when accepted
		reason   InexactReason // the refusal otherwise
	}{
		{"another case is unknown", `{"StepID":"s","STEPID":"t"}`, &exactProbe{}, ""},
		{"the exact spelling wins", `{"stepId":"x2","StepId":"x3"}`, str("x2"), ""},
		{"the exact spelling wins, either order", `{"StepId":"x3","stepId":"x2"}`, str("x2"), ""},
		{"Go field names need their exact case", `{"plain":"p"}`, &exactProbe{}, ""},
		{"a repeated member", `{"stepId":"a","stepId":"b"}`, nil, "duplicate member name"},
		{"a repeated map key", `{"custom":{"k":1,"k":2}}`, nil, "duplicate member name"},
		{"a repeated key of a raw map", `{"fields":{"k":1,"k":2}}`, nil, "duplicate member name"},
		{"a repeated member of a nested struct", `{"nested":{"a":1,"a":2}}`, nil, "duplicate member name"},
		{"a repeated member in a slice element", `{"list":[{"a":1},{"a":1,"a":2}]}`, nil, "duplicate member name"},
		{"a repeated member in a map value", `{"byName":{"x":{"a":1,"a":2}}}`, nil, "duplicate member name"},
		{"a repeated unknown member", `{"other":1,"other":2}`, nil, "duplicate member name"},
		{"a repeat inside an opaque value is carried", `{"stepId":"s","input":{"x":1,"x":2}}`,
			&exactProbe{StepID: "s", Input: json.RawMessage(`{"x":1,"x":2}`)}, ""},
		{"a repeat inside a raw map value is carried", `{"fields":{"k":{"x":1,"x":2}}}`,
			&exactProbe{Fields: map[string]json.RawMessage{"k": json.RawMessage(`{"x":1,"x":2}`)}}, ""},
		{"a repeat inside an unknown member is ignored", `{"stepId":"s","other":{"x":1,"x":2}}`, str("s"), ""},
		{"an opaque repeat, then a real one", `{"input":{"x":1,"x":2},"stepId":"a","stepId":"b"}`, nil, "duplicate member name"},
		{"invalid UTF-8 in a string", "{\"stepId\":\"\xff\"}", nil, "invalid UTF-8"},
		{"invalid UTF-8 in a name", "{\"\xc3\":1}", nil, "invalid UTF-8"},
		{"invalid UTF-8 inside an opaque value", "{\"input\":{\"q\":\"a\xed\xa0\x80\"}}", nil, "invalid UTF-8"},
		{"a lone high surrogate", `{"stepId":"\ud800"}`, nil, "lone surrogate escape"},
		{"a lone low surrogate inside an opaque value", `{"input":["\udc00"]}`, nil, "lone surrogate escape"},
		{"a lone surrogate in an unknown member", `{"other":"x\ud83d"}`, nil, "lone surrogate escape"},
		{"a lone surrogate in a name", `{"\ud800":1}`, nil, "lone surrogate escape"},
		{"reversed surrogates", `{"stepId":"\ude00\ud83d"}`, nil, "lone surrogate escape"},
		{"trailing data", `{"stepId":"s"} {}`, nil, "malformed JSON"},
		{"not JSON", `{"stepId":`, nil, "malformed JSON"},
		{"empty input", ``, nil, "malformed JSON"},
		{"a wrong type", `{"stepId":"s","attempt":"2"}`, nil, "wrong type"},
		{"a fraction for an integer", `{"attempt":1.0}`, nil, "wrong type"},
		{"not an object", `[1]`, nil, "wrong type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := exactProbe{StepID: "stale", Count: 9}
			err := UnmarshalExact([]byte(c.in), &got)
			if c.want != nil {
				if err != nil {
					t.Fatalf("UnmarshalExact(%s) = %v", c.in, err)
				}
				if !reflect.DeepEqual(got, *c.want) {
					t.Fatalf("UnmarshalExact(%s)\n got  %+v\n want %+v", c.in, got, *c.want)
				}
				return
			}
			var ie *InexactJSONError
			if !errors.Is(err, ErrInexactJSON) || !errors.As(err, &ie) || ie.Reason != c.reason {
				t.Fatalf("UnmarshalExact(%s) = %v, want reason %q", c.in, err, c.reason)
			}
			if ie.Offset < 0 || ie.Offset > int64(len(c.in)) {
				t.Errorf("offset %d outside the input", ie.Offset)
			}
			if !reflect.DeepEqual(got, exactProbe{}) {
				t.Errorf("refused input left %+v, want the zero value", got)
			}
		})
	}
}

func TestUnmarshalExactReplacesInsteadOfMerging(t *testing.T) {
	got := exactProbe{StepID: "old", Custom: map[string]float64{"a": 1}, Nested: &exactNested{A: 1, R: json.RawMessage(`1`)}}
	if err := UnmarshalExact([]byte(`{"custom":{"b":2},"nested":{"a":2}}`), &got); err != nil {
		t.Fatal(err)
	}
	want := exactProbe{Custom: map[string]float64{"b": 2}, Nested: &exactNested{A: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestUnmarshalExactIntoInterfacesChecksEveryLevel(t *testing.T) {
	var v any
	err := UnmarshalExact([]byte(`{"a":{"b":1,"b":2}}`), &v)
	if !errors.Is(err, ErrInexactJSON) || v != nil {
		t.Fatalf("any: %v, %v; want a refusal and nil", v, err)
	}
	if err := UnmarshalExact([]byte(`{"a":[{"b":1}]}`), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, map[string]any{"a": []any{map[string]any{"b": 1.0}}}) {
		t.Fatalf("any: %#v", v)
	}
}

// TestUnmarshalExactUnmodelledTypesStayStrict: where the repeated-name check
// cannot model a type's member names (an embedded struct), a repeated name
// anywhere, even inside an opaque value, is refused.
func TestUnmarshalExactUnmodelledTypesStayStrict(t *testing.T) {
	type embedding struct {
		exactNested
		Input json.RawMessage `json:"input"`
	}
	var v embedding
	if err := UnmarshalExact([]byte(`{"a":1,"input":{"x":1}}`), &v); err != nil || v.A != 1 {
		t.Fatalf("well-formed: %+v, %v", v, err)
	}
	err := UnmarshalExact([]byte(`{"a":1,"input":{"x":1,"x":2}}`), &v)
	var ie *InexactJSONError
	if !errors.As(err, &ie) || ie.Reason != "duplicate member name" {
		t.Fatalf("got %v, want a duplicate member name refusal", err)
	}
}

func TestUnmarshalExactKnownRefusesUnknownMembers(t *testing.T) {
	for in, reason := range map[string]InexactReason{
		`{"stepId":"s"}`:                            "",
		`{"stepId":"s","custom":{"any key":1}}`:     "",
		`{"stepId":"s","input":{"x":1,"x":2}}`:      "",
		`{"stepId":"s","extra":1}`:                  "unknown member name",
		`{"StepId":"s"}`:                            "unknown member name",
		`{"nested":{"a":1,"b":2}}`:                  "unknown member name",
		`{"stepId":"s","stepId":"s"}`:               "duplicate member name",
		`{"stepId":"s","extra":{"x":1,"x":2}}`:      "unknown member name",
		`{"input":{"x":1,"x":2},"stepId":"\ud800"}`: "lone surrogate escape",
	} {
		var v exactProbe
		err := UnmarshalExactKnown([]byte(in), &v)
		var ie *InexactJSONError
		switch {
		case reason == "" && err != nil:
			t.Errorf("UnmarshalExactKnown(%s) = %v", in, err)
		case reason != "" && (!errors.As(err, &ie) || ie.Reason != reason):
			t.Errorf("UnmarshalExactKnown(%s) = %v, want reason %q", in, err, reason)
		}
	}
}

func TestUnmarshalExactRefusesABadDestination(t *testing.T) {
	var p *exactProbe
	for _, v := range []any{nil, exactProbe{}, p} {
		if err := UnmarshalExact([]byte(`{}`), v); !errors.Is(err, ErrInexactJSON) {
			t.Errorf("UnmarshalExact into %T = %v, want ErrInexactJSON", v, err)
		}
	}
}

func TestUnmarshalExactErrorsDoNotEchoInput(t *testing.T) {
	for _, in := range []string{
		`{"s3cret":1,"s3cret":2}`, `{"stepId":"s3cret\ud800"}`, `{"attempt":"s3cret"}`, `{"s3cret"`, `{"input":1} s3cret`,
	} {
		var v exactProbe
		err := UnmarshalExact([]byte(in), &v)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("UnmarshalExact(%s) = %v: want an error that does not quote the input", in, err)
		}
	}
}

// FuzzUnmarshalExact: on any input UnmarshalExact never panics, leaves the
// zero value when it refuses, accepts only valid UTF-8, and, where no name
// repeats at any depth, decodes as the strict decoder.
func FuzzUnmarshalExact(f *testing.F) {
	for _, s := range []string{
		`{"stepId":"s","input":{"x":1,"x":2}}`, `{"stepId":"a","stepId":"b"}`, `{"StepID":"s"}`,
		`{"custom":{"k":1,"k":2}}`, `{"list":[{"a":1,"a":2}]}`, `{"byName":{"x":{"r":{"q":1,"q":1}}}}`,
		`{"stepId":"\ud800"}`, "{\"input\":\"\xff\"}", `{"attempt":1.5}`, `null`, `[]`, `{"fields":{"a":{"b":[1,{"c":1,"c":2}]}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v exactProbe
		err := UnmarshalExact([]byte(in), &v)
		if err != nil {
			if !errors.Is(err, ErrInexactJSON) || !reflect.DeepEqual(v, exactProbe{}) {
				t.Fatalf("refusal %v left %+v", err, v)
			}
			return
		}
		if !utf8.ValidString(in) {
			t.Fatalf("UnmarshalExact accepts invalid UTF-8 in %q", in)
		}
		var any1 any
		if UnmarshalExact([]byte(in), &any1) == nil { // no repeat at any depth
			var strict exactProbe
			if err := unmarshalStrict([]byte(in), &strict); err != nil || !reflect.DeepEqual(strict, v) {
				t.Fatalf("%q: strict decoder gives %+v, %v; UnmarshalExact %+v", in, strict, err, v)
			}
		}
	})
}
