package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Requests are decoded strictly, with github.com/go-json-experiment/json
// rather than encoding/json, which would silently turn invalid UTF-8 and
// lone-surrogate escapes ("\udc00") into U+FFFD — accepting "bad\xff" as
// another id, and letting different ids collide — and which matches member
// names case-insensitively. Here:
//
//   - a body that is not JSON (syntax) is CodeParseError;
//   - the request object's members are spelled exactly (jsonrpc, id,
//     method, params), each at most once, or it is CodeInvalidRequest;
//   - an id that is not a string, a number or null, or a string id that is
//     not valid UTF-8 (or holds a lone surrogate escape), is
//     CodeInvalidRequest answered with id null: an id is echoed only once it
//     is known to be valid JSON;
//   - params are by name, each member spelled exactly as the method's
//     params struct spells it and given once; any text in them, down to the
//     deepest value of a payload, that is not valid UTF-8 or holds a lone
//     surrogate escape is CodeInvalidParams, naming where.
//
// Inside a JSON value the kernel treats as opaque (input, payload,
// credentials) a repeated member name is accepted, as the kernel reads such
// values the way JSON.parse does (event.Canonical); only the names of the
// request object and of params must be unique. Every refusal happens
// before the runtime is called, so it appends nothing.

// Limits on what a refusal message quotes from the request.
const (
	maxQuotedName     = 64  // a member name
	maxQuotedLocation = 160 // a JSON Pointer into params
)

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name  string
	value jsontext.Value
}

// errNotObject refuses a value that is not a JSON object.
var errNotObject = errors.New("wire: not a JSON object")

// duplicateError refuses a member name given twice in one object.
type duplicateError struct{ name string }

func (e *duplicateError) Error() string {
	return "wire: member " + quoteCut(e.name, maxQuotedName) + " given twice"
}

// objectMembers splits the JSON object raw into its members, refusing a
// name that repeats (which of two "executionId"s would be meant?). The
// values are only read, not decoded: names may repeat inside them. opts
// are jsontext options; without jsontext.AllowInvalidUTF8 every string of
// raw, names and nested values alike, must be valid UTF-8 without lone
// surrogate escapes (a *jsontext.SyntacticError otherwise).
func objectMembers(raw []byte, opts ...jsontext.Options) ([]member, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), append(opts, jsontext.AllowDuplicateNames(true))...)
	if dec.PeekKind() != '{' {
		return nil, errNotObject
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var ms []member
	seen := make(map[string]bool)
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		n := name.String() // before the next read voids the token
		value, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, &duplicateError{name: n}
		}
		seen[n] = true
		ms = append(ms, member{name: n, value: value.Clone()})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, errors.New("wire: data after the JSON object")
	}
	return ms, nil
}

// isJSON reports whether b is one JSON value syntactically, whatever the
// text of its strings: what separates CodeParseError from the refusals of
// a JSON request.
func isJSON(b []byte) bool {
	return jsontext.Value(b).IsValid(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

// parseRequest reads one request object. On a refusal the returned request
// carries the id to answer with, once the id itself was found valid; an
// invalid id is answered with null.
func parseRequest(b []byte) (request, *Error) {
	if !isJSON(b) {
		return request{}, newError(CodeParseError, "the body is not JSON: send one JSON-RPC 2.0 request object, or an array of them", nil)
	}
	// The object is split leniently, so that a bad byte in one member is
	// reported against that member; then each member is decoded strictly.
	ms, err := objectMembers(b, jsontext.AllowInvalidUTF8(true))
	var dup *duplicateError
	switch {
	case errors.As(err, &dup):
		return request{}, newError(CodeInvalidRequest, "not a JSON-RPC 2.0 request object: member "+
			quoteCut(dup.name, maxQuotedName)+" is given twice", nil)
	case err != nil:
		return request{}, newError(CodeInvalidRequest, "not a JSON-RPC 2.0 request object (jsonrpc, id, method, params)", nil)
	}
	var (
		req             request
		jsonrpc, method jsontext.Value
		unknown         []string
	)
	for _, m := range ms {
		switch m.name {
		case "jsonrpc":
			jsonrpc = m.value
		case "id":
			if !validID(m.value) {
				return request{}, newError(CodeInvalidRequest, "id must be a string, a number or null, and a string id "+
					"valid UTF-8 without lone surrogate escapes; answered with id null", nil)
			}
			req.ID = json.RawMessage(m.value)
		case "method":
			method = m.value
		case "params":
			req.Params = json.RawMessage(m.value)
		default:
			unknown = append(unknown, m.name)
		}
	}
	if len(unknown) > 0 {
		// A name read leniently holds U+FFFD where its text was invalid:
		// it is not quoted back rewritten.
		name := quoteCut(unknown[0], maxQuotedName)
		if strings.ContainsRune(unknown[0], utf8.RuneError) {
			name = "(a name holding invalid UTF-8 or U+FFFD)"
		}
		return req, newError(CodeInvalidRequest, "not a JSON-RPC 2.0 request object: unknown member "+name+
			"; the members are jsonrpc, id, method and params, spelled exactly", nil)
	}
	var version string
	if jsonrpc == nil || jsonv2.Unmarshal(jsonrpc, &version) != nil || version != "2.0" {
		return req, newError(CodeInvalidRequest, `jsonrpc must be "2.0"`, nil)
	}
	if method != nil {
		if err := jsonv2.Unmarshal(method, &req.Method); err != nil {
			return req, newError(CodeInvalidRequest, "method must be a string in valid UTF-8 (loom.handshake lists the methods)", nil)
		}
	}
	if req.Method == "" {
		return req, newError(CodeInvalidRequest, "method is required", nil)
	}
	return req, nil
}

// validID reports whether id may be echoed: a number, null, or a string
// that is valid UTF-8 and holds no lone surrogate escape.
func validID(id jsontext.Value) bool {
	switch id.Kind() {
	case 'n', '0':
		return true
	case '"':
		return id.IsValid()
	}
	return false
}

// splitBatch splits a JSON array into its elements, leniently: each is
// then read by parseRequest, so one bad request does not spoil the batch.
func splitBatch(body []byte) ([]jsontext.Value, error) {
	var raw []jsontext.Value
	err := jsonv2.Unmarshal(body, &raw, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	return raw, err
}

// decodeParams reads params strictly into the struct into points to: by
// name only; every member spelled exactly as a field's JSON name and given
// once (an unknown one is a mistake the caller hears about — it may be a
// misspelled one — not one silently dropped); every value of the right JSON
// type; and all text valid UTF-8 without lone surrogate escapes.
func decodeParams(raw json.RawMessage, into any, required bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		if required {
			return invalidParams("params are required (a JSON object)")
		}
		return nil
	}
	if raw[0] != '{' {
		return invalidParams("params must be a JSON object (by-name params)")
	}
	ms, err := objectMembers(raw)
	if err != nil {
		return paramsError(raw, err)
	}
	known := fieldNames(reflect.TypeOf(into).Elem())
	for _, m := range ms {
		if !known[m.name] {
			return invalidParams("unknown param " + quoteCut(m.name, maxQuotedName) + "; this method takes " +
				strings.Join(fieldList(reflect.TypeOf(into).Elem()), ", ") + " (names are case-sensitive)")
		}
	}
	err = jsonv2.Unmarshal(raw, into, jsonv2.RejectUnknownMembers(true), jsontext.AllowDuplicateNames(true))
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		// The error's own text quotes the value; the message does not.
		name := se.JSONPointer.LastToken()
		return newError(CodeInvalidParams, "param "+quoteCut(name, maxQuotedName)+" must be "+jsonKind(se.GoType),
			map[string]any{"location": cut(string(se.JSONPointer), maxQuotedLocation)})
	}
	return paramsError(raw, err)
}

// paramsError renders a refusal of params that are not a well-formed
// object: text that is not UTF-8, a lone surrogate escape, a repeated name.
func paramsError(raw []byte, err error) error {
	var (
		se  *jsontext.SyntacticError
		dup *duplicateError
	)
	switch {
	case errors.As(err, &dup):
		return invalidParams("param " + quoteCut(dup.name, maxQuotedName) + " is given twice")
	case errors.As(err, &se):
		loc := string(se.JSONPointer)
		if strings.HasPrefix(loc, "/credentials/") {
			loc = "/credentials" // the shape of credentials is nobody's business
		}
		loc = cut(loc, maxQuotedLocation)
		where, data := "params are", map[string]any(nil)
		if loc != "" {
			where, data = "param "+loc+" is", map[string]any{"location": loc}
		}
		var msg string
		switch off := se.ByteOffset; {
		case off >= 0 && off < int64(len(raw)) && raw[off] == '\\':
			msg = where + " not text: it holds an invalid \\u escape: a lone UTF-16 surrogate (such as \\udc00) or a broken pair, " +
				"which no UTF-8 text can hold; escape a character beyond U+FFFF as a surrogate pair (\\ud83d\\ude00) or send it as UTF-8"
		case !utf8.Valid(raw):
			msg = where + " not valid UTF-8: send every string, ids and payloads alike, as UTF-8 text " +
				"(it is refused rather than rewritten, so it cannot stand for another id)"
		default:
			msg = where + " not well-formed JSON"
		}
		return newError(CodeInvalidParams, msg+"; nothing was run", data)
	}
	return invalidParams("params must be a JSON object (by-name params)")
}

// jsonKind names the JSON a Go field type takes, for a refusal.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "of another JSON type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a JSON integer (" + t.Kind().String() + ")"
	}
	return "a JSON " + t.Kind().String()
}

// fieldNames is the set of the JSON names of a params struct's fields.
func fieldNames(t reflect.Type) map[string]bool {
	names := make(map[string]bool)
	for _, n := range fieldList(t) {
		names[n] = true
	}
	return names
}

// fieldList lists the JSON names of a params struct's fields in order.
func fieldList(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// quoteCut quotes s for a message, cut to n bytes on a rune boundary.
func quoteCut(s string, n int) string { return strconv.Quote(cut(s, n)) }

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
