package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const approval = `{"type":"object","properties":{"approved":{"type":"boolean"},"by":{"type":"string","default":"unknown"}},"required":["approved"],"additionalProperties":false}`

func TestParseFillsDefaultsAndCanonicalizes(t *testing.T) {
	s, err := Compile(approval)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Parse([]byte(`{ "approved" : true }`))
	if err != nil || string(got) != `{"approved":true,"by":"unknown"}` {
		t.Fatalf("%s %v", got, err)
	}
}

func TestParseRefusalsAreReadableAndTyped(t *testing.T) {
	s, _ := Compile(approval)
	cases := map[string]string{
		`{"approved":"yes"}`:          "at /approved: got string, want boolean",
		`{}`:                          "missing property 'approved'",
		`{"approved":true,"extra":1}`: "has properties the schema does not allow",
		`null`:                        "got null, want object",
	}
	for in, want := range cases {
		_, err := s.Parse([]byte(in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", in, err, want)
		}
	}
}

func TestCompileRefusesExternalReferences(t *testing.T) {
	for _, src := range []string{`{"$ref":"file:///etc/passwd"}`, `{"$ref":"https://example.com/s.json"}`, `not json`} {
		if _, err := Compile(src); err == nil {
			t.Errorf("Compile(%s) succeeded", src)
		}
	}
}

func TestARefusalListsEveryViolationWithItsPointerAndKeyword(t *testing.T) {
	s, err := Compile(`{"type":"object","properties":{"approved":{"type":"boolean"},"a/b":{"type":"integer"}},"required":["approved","by"]}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Parse(json.RawMessage(`{"approved":"yes","a/b":"secret-value"}`))
	var ie *InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse = %v, want *InvalidError", err)
	}
	got := map[string]string{}
	for _, v := range ie.Violations {
		got[v.Pointer] = v.Keyword
		if strings.Contains(v.Message, "secret-value") {
			t.Fatalf("a violation echoes the payload: %+v", v)
		}
	}
	want := map[string]string{"/approved": "properties/approved/type", "/a~1b": "properties/a~1b/type", "/": "required"}
	for p, k := range want {
		if !strings.HasSuffix(got[p], lastKeyword(k)) {
			t.Fatalf("violations %+v: want %s at %s", ie.Violations, k, p)
		}
	}
}

func lastKeyword(path string) string {
	parts := strings.Split(path, "/")
	return parts[len(parts)-1]
}
