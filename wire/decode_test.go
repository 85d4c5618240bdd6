package wire

import (
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzParseRequest: whatever the body, the answer encodes as valid JSON in
// UTF-8, an id kept for it is a valid JSON-RPC id, and params that decode
// hold only valid text.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"execution.resume","params":{"executionId":"x","eventType":"e","payload":{"a":[1,"\ud83d\ude00"]}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"m\"}",
		`{"jsonrpc":"2.0","id":"\udc00","method":"m","params":{"executionId":"\ud800"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"executionId\":\"a\xff\",\"payload\":{\"k\":1,\"k\":2}}}",
		`{"jsonrpc":"2.0","id":1,"ID":2,"Method":"m"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
		`{"jsonrpc":"2.0","id":-1.5e300,"method":"m","params":null}`,
		`{"jsonrpc":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, e := parseRequest(b)
		resp := response{JSONRPC: "2.0", ID: req.ID, Result: req.Method}
		if e != nil {
			resp = errorResponse(req.ID, e)
		}
		if _, err := marshalValid(resp); err != nil {
			t.Fatalf("the answer to %q does not encode: %v", b, err)
		}
		if req.ID != nil && !validID(jsontext.Value(req.ID)) {
			t.Fatalf("id %q kept for %q", req.ID, b)
		}
		if e != nil {
			return
		}
		if !utf8.ValidString(req.Method) {
			t.Fatalf("method %q accepted from %q", req.Method, b)
		}
		var p ResumeParams
		if decodeParams(req.Params, &p, true) != nil {
			return
		}
		for _, s := range []string{p.ExecutionID, p.EventType} {
			if !utf8.ValidString(s) {
				t.Fatalf("param %q accepted from %q", s, b)
			}
		}
		for _, v := range [][]byte{p.Payload, p.Credentials} {
			if len(v) > 0 && !jsontext.Value(v).IsValid(jsontext.AllowDuplicateNames(true)) {
				t.Fatalf("value %q accepted from %q", v, b)
			}
		}
	})
}
