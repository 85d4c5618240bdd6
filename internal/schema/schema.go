// Package schema compiles and applies the JSON Schemas that shape resume
// payloads and typed failure channels. External references are refused: a
// schema can never make the kernel read a file or the network.
package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/loom-kernel/loom/event"
)

// Schema is a compiled JSON Schema (draft 2020-12 unless "$schema" says
// otherwise).
type Schema struct {
	compiled *jsonschema.Schema
	defaults map[string]json.RawMessage // top-level property defaults
}

// noLoader refuses every external $ref.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema: external reference %q refused", url)
}

// Compile parses and compiles src.
func Compile(src string) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("schema: not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertFormat()
	const loc = "loom:schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s := &Schema{compiled: compiled}
	var top struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal([]byte(src), &top) == nil {
		for name, p := range top.Properties { //loom:order-independent map into map
			if p.Default != nil {
				if s.defaults == nil {
					s.defaults = map[string]json.RawMessage{}
				}
				s.defaults[name] = p.Default
			}
		}
	}
	return s, nil
}

// ErrInvalid matches a payload the schema refuses.
var ErrInvalid = errors.New("schema: payload does not match")

// Parse validates raw and returns the parsed value that must be recorded:
// top-level property defaults filled in for an object, then rendered in
// canonical JSON. A refusal wraps ErrInvalid and names the failing location,
// never the payload.
func (s *Schema) Parse(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	withDefaults, err := s.fillDefaults(raw)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(withDefaults))
	if err != nil {
		return nil, fmt.Errorf("%w: not JSON", ErrInvalid)
	}
	if err := s.compiled.Validate(inst); err != nil {
		return nil, invalidError(err)
	}
	return event.Canonical(withDefaults)
}

func (s *Schema) fillDefaults(raw json.RawMessage) (json.RawMessage, error) {
	if len(s.defaults) == 0 {
		return raw, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw, nil // not an object: validation decides
	}
	added := false
	for name, def := range s.defaults { //loom:order-independent map into map, then canonicalized
		if _, ok := obj[name]; !ok {
			obj[name] = def
			added = true
		}
	}
	if !added {
		return raw, nil
	}
	return json.Marshal(obj)
}

var english = message.NewPrinter(language.English)

// MaxViolations bounds the violations an InvalidError lists.
const MaxViolations = 16

// Violation is one way a payload fails its schema: where (a JSON pointer
// into the payload), which keyword refused it, and the validator's
// message. It never holds the payload's values.
type Violation struct {
	Pointer string `json:"pointer"`
	Keyword string `json:"keyword"`
	Message string `json:"message"`
}

// InvalidError is a payload the schema refuses, with every leaf violation
// (at most MaxViolations). It matches ErrInvalid.
type InvalidError struct {
	Violations []Violation
}

func (e *InvalidError) Error() string {
	if len(e.Violations) == 0 {
		return ErrInvalid.Error()
	}
	v := e.Violations[0]
	s := ErrInvalid.Error() + ": at " + v.Pointer + ": " + v.Message
	if n := len(e.Violations) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// invalidError collects the leaf violations of a validation error, in the
// validator's order.
func invalidError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: invalid", ErrInvalid)
	}
	out := &InvalidError{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out.Violations) >= MaxViolations {
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		msg := e.ErrorKind.LocalizedString(english)
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
		out.Violations = append(out.Violations, Violation{Pointer: pointer(e.InstanceLocation),
			Keyword: kw, Message: SafeMessage(kw, msg)})
	}
	walk(ve)
	// The validator walks maps: sort, so one refusal reads the same every
	// time.
	slices.SortFunc(out.Violations, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
	})
	return out
}

// SafeMessage keeps the validator's message only for keywords whose message
// names types, counts or the schema's own words ("got string, want
// boolean", "missing property 'approved'"); for the others — pattern,
// format, minimum and the like, whose messages quote the refused value, and
// additionalProperties and propertyNames, which quote the payload's names —
// it says what failed in its own words. keyword may be a keyword path.
func SafeMessage(keyword, message string) string {
	kw := keyword
	if i := strings.LastIndexByte(kw, '/'); i >= 0 {
		kw = kw[i+1:]
	}
	switch kw {
	case "type", "required", "enum", "const", "minLength", "maxLength", "minItems", "maxItems",
		"minProperties", "maxProperties", "uniqueItems", "additionalItems", "dependentRequired",
		"dependencies", "oneOf", "anyOf", "allOf", "not", "false", "contains", "minContains", "maxContains":
		return message
	case "pattern":
		return "does not match the pattern the schema requires"
	case "format":
		return "is not in the format the schema requires"
	case "minimum", "exclusiveMinimum":
		return "is below the minimum the schema allows"
	case "maximum", "exclusiveMaximum":
		return "is above the maximum the schema allows"
	case "multipleOf":
		return "is not a multiple the schema allows"
	case "additionalProperties", "unevaluatedProperties":
		return "has properties the schema does not allow"
	case "propertyNames":
		return "has a property name the schema does not allow"
	}
	return "fails the schema's " + strconv.Quote(kw) + " keyword"
}

// pointer renders an instance location as a JSON pointer (RFC 6901).
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}
