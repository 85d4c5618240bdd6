package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Exact decoding of recorded JSON. The log is a language-neutral ABI, so a
// payload means the same thing to every reader: encoding/json, which matches
// member names case-insensitively, lets later duplicates win and rewrites
// invalid UTF-8 and lone surrogates as U+FFFD, is not used for it.

// ErrInexactJSON matches, with errors.Is, every error UnmarshalExact and
// UnmarshalExactKnown return: the input was refused.
var ErrInexactJSON = errors.New("event: inexact JSON")

// InexactReason says what UnmarshalExact refused.
type InexactReason string

// The reasons of an *InexactJSONError. The first four say the input is not
// exact JSON; the last two that well-formed JSON does not fit the
// destination.
const (
	ReasonDuplicateName InexactReason = "duplicate member name"
	ReasonInvalidUTF8   InexactReason = "invalid UTF-8"
	ReasonLoneSurrogate InexactReason = "lone surrogate escape"
	ReasonMalformed     InexactReason = "malformed JSON"
	ReasonWrongType     InexactReason = "wrong type"
	ReasonUnknownName   InexactReason = "unknown member name"
)

// InexactJSONError says why UnmarshalExact refused its input and where. It
// never quotes the input; Unwrap gives the decoder's own error, which may.
type InexactJSONError struct {
	// Reason is what was refused: one of the Reason constants.
	Reason InexactReason
	// Offset is the byte offset in the input near which the problem lies.
	Offset int64
	err    error
}

func (e *InexactJSONError) Error() string {
	return "event: inexact JSON: " + string(e.Reason) + " at byte " + strconv.FormatInt(e.Offset, 10)
}

// Is makes errors.Is(err, ErrInexactJSON) true.
func (e *InexactJSONError) Is(target error) bool { return target == ErrInexactJSON }

// Unwrap returns the decoder's error.
func (e *InexactJSONError) Unwrap() error { return e.err }

// UnmarshalExact decodes the single JSON value data into v, a non-nil
// pointer, under the rules every reader of the log applies:
//
//   - member names match struct fields exactly (case-sensitive, by the json
//     tag's name); a member spelled any other way is unknown and, like any
//     unknown member, ignored — the field it resembles stays absent;
//   - a member name given twice in one object that is decoded into a Go
//     struct or map is refused. Inside an opaque value (a json.RawMessage
//     or jsontext.Value field, or an unknown member) names may repeat: such
//     values are carried as recorded and read as JSON.parse and
//     Canonical read them, the last one winning;
//   - every string, names and opaque values included, must be valid UTF-8
//     without a lone surrogate escape ("\ud800" with no partner);
//   - trailing data after the value is refused.
//
// For well-formed input it decodes as encoding/json does: json.RawMessage
// keeps the recorded bytes (null as "null"), a null pointer, map or slice
// stays nil, a number must fit its field's type, and types with their own
// UnmarshalJSON decode themselves. Unlike json.Unmarshal it
// replaces *v instead of merging into it: *v is reset to its zero value
// first, and left zero on any error, so what a caller sees never depends on
// the order of members up to the first fault.
//
// Every error matches ErrInexactJSON and is an *InexactJSONError.
func UnmarshalExact(data []byte, v any) error {
	return unmarshalExact(data, v, false)
}

// UnmarshalExactKnown is UnmarshalExact for formats the kernel owns, such as
// snapshots: it also refuses an unknown member (one that no field of the
// destination's struct types spells exactly), with ReasonUnknownName.
// Member names of maps are data and never unknown.
func UnmarshalExactKnown(data []byte, v any) error {
	return unmarshalExact(data, v, true)
}

func unmarshalExact(data []byte, v any, known bool) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &InexactJSONError{Reason: ReasonWrongType, err: errors.New("event: UnmarshalExact needs a non-nil pointer")}
	}
	dst := rv.Elem()
	dst.SetZero()
	// The fast path: the decoder refuses repeated names at every depth, so
	// input without any decodes in one pass.
	err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(known))
	if err != nil && errors.Is(err, jsontext.ErrDuplicateName) {
		// A repeated name somewhere: refused only where it is one of v's
		// own members, not inside an opaque value.
		dst.SetZero()
		switch werr := checkMemberNames(data, dst.Type()); {
		case werr == nil:
			err = jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(known), jsontext.AllowDuplicateNames(true))
		case !errors.Is(werr, errUnsupportedType):
			err = werr
		}
	}
	if err != nil {
		dst.SetZero()
		return inexact(data, err)
	}
	return nil
}

// errUnsupportedType stops the repeated-name check at a struct whose member
// names it cannot model (an embedded or inlined field, a quoted or
// case-insensitive name): the strict decoder's refusal then stands.
var errUnsupportedType = errors.New("event: member names of this type are not modelled")

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	jsonValueType  = reflect.TypeFor[jsontext.Value]()
)

// checkMemberNames walks data as a value of type t and refuses a member name
// repeated in an object decoded into a struct or a map (or into an
// interface, which decodes every level). It runs only once the strict
// decoder has met a repeated name.
func checkMemberNames(data []byte, t reflect.Type) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	return walkNames(dec, t)
}

func walkNames(dec *jsontext.Decoder, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return dec.SkipValue()
	}
	switch dec.PeekKind() {
	case '{':
		var member func(name string) (reflect.Type, bool)
		switch t.Kind() {
		case reflect.Struct:
			fields, err := memberTypes(t)
			if err != nil {
				return err
			}
			member = func(name string) (reflect.Type, bool) { ft, ok := fields[name]; return ft, ok }
		case reflect.Map:
			member = func(string) (reflect.Type, bool) { return t.Elem(), true }
		case reflect.Interface:
			member = func(string) (reflect.Type, bool) { return t, true }
		default:
			return dec.SkipValue() // the decoder refuses the type itself
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		seen := map[string]bool{}
		for dec.PeekKind() != '}' {
			at := dec.InputOffset()
			tok, err := dec.ReadToken()
			if err != nil {
				return err
			}
			name := tok.String()
			if seen[name] {
				return &jsontext.SyntacticError{ByteOffset: at, Err: jsontext.ErrDuplicateName}
			}
			seen[name] = true
			ft, ok := member(name)
			if !ok {
				err = dec.SkipValue() // unknown members are opaque
			} else {
				err = walkNames(dec, ft)
			}
			if err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	case '[':
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array && t.Kind() != reflect.Interface {
			return dec.SkipValue()
		}
		elem := t
		if t.Kind() != reflect.Interface {
			elem = t.Elem()
		}
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		for dec.PeekKind() != ']' {
			if err := walkNames(dec, elem); err != nil {
				return err
			}
		}
		_, err := dec.ReadToken()
		return err
	default:
		return dec.SkipValue()
	}
}

// opaque reports whether values of t are carried as recorded: raw JSON, or
// a type with its own decoding method (which applies its own rules).
func opaque(t reflect.Type) bool {
	if t == rawMessageType || t == jsonValueType {
		return true
	}
	p := reflect.PointerTo(t)
	return p.Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		p.Implements(reflect.TypeFor[jsonv2.Unmarshaler]()) ||
		p.Implements(reflect.TypeFor[jsonv2.UnmarshalerFrom]())
}

// memberTypes maps the JSON member names of struct t to their field types,
// as the decoder does for plain tagged fields.
func memberTypes(t reflect.Type) (map[string]reflect.Type, error) {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("json")
		if tag == "-" || (!sf.IsExported() && !sf.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous || strings.ContainsAny(name, `'"\`) ||
			strings.Contains(opts, "inline") || strings.Contains(opts, "unknown") || strings.Contains(opts, "case") {
			return nil, errUnsupportedType
		}
		if !hasTag || name == "" {
			name = sf.Name
		}
		out[name] = sf.Type
	}
	return out, nil
}

// inexact classifies a decoder error without quoting the input.
func inexact(data []byte, err error) error {
	out := &InexactJSONError{Reason: ReasonMalformed, err: err}
	var se *jsontext.SyntacticError
	var me *jsonv2.SemanticError
	switch {
	case errors.As(err, &se):
		out.Offset = se.ByteOffset
		msg := ""
		if se.Err != nil {
			msg = se.Err.Error()
		}
		switch {
		case errors.Is(se.Err, jsontext.ErrDuplicateName):
			out.Reason = ReasonDuplicateName
		case strings.Contains(msg, "UTF-8"):
			out.Reason = ReasonInvalidUTF8
		case strings.Contains(msg, "surrogate"):
			out.Reason = ReasonLoneSurrogate
		}
	case errors.As(err, &me):
		out.Offset = me.ByteOffset
		out.Reason = ReasonWrongType
		if errors.Is(me.Err, jsonv2.ErrUnknownName) {
			out.Reason = ReasonUnknownName
		}
	}
	if out.Offset > int64(len(data)) {
		out.Offset = int64(len(data))
	}
	return out
}
