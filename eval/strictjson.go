package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// The strict JSON readers of the suite file: every member decoded with
// exact names (event.UnmarshalExact: a member given twice or spelled in
// another case is refused), every object checked for unknown members, and
// every refusal a *SuiteFileError naming the member's path.

// object decodes raw as an object whose members are among allowed, and
// refuses any other member, naming the ones allowed.
func (p *fileParser) object(raw json.RawMessage, path string, allowed ...string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := event.UnmarshalExact(raw, &m); err != nil || m == nil {
		var ie *event.InexactJSONError
		problem, fix := "is not a JSON object", "write it as a JSON object {…}"
		if errors.As(err, &ie) && ie.Reason != event.ReasonWrongType {
			problem = fmt.Sprintf("is not valid JSON (%s at byte %d)", ie.Reason, ie.Offset)
			fix = "fix the JSON there"
		}
		if path == "" {
			problem = "the file " + problem
		}
		return nil, p.fail(path, problem, fix)
	}
	keys := make([]string, 0, len(m))
	for k := range m { //loom:sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, p.fail(join(path, k), "is unknown", "the members allowed here are "+strings.Join(allowed, ", ")+": remove it or fix its spelling")
		}
	}
	return m, nil
}

// join extends a member path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// str reads a string member; required ones must be present and non-empty.
func (p *fileParser) str(m map[string]json.RawMessage, path, key string, required bool) (string, error) {
	raw, ok := m[key]
	if !ok {
		if required {
			return "", p.fail(join(path, key), "is missing", "add it: it is required here")
		}
		return "", nil
	}
	var s string
	if err := event.UnmarshalExact(raw, &s); err != nil {
		return "", p.fail(join(path, key), "is not a string", "write it as a JSON string")
	}
	if required && s == "" {
		return "", p.fail(join(path, key), "is empty", "give it a value")
	}
	return s, nil
}

// number reads an optional number member within [lo, hi].
func (p *fileParser) number(m map[string]json.RawMessage, path, key string, lo, hi float64) (float64, error) {
	raw, ok := m[key]
	if !ok {
		return 0, nil
	}
	var f float64
	if err := event.UnmarshalExact(raw, &f); err != nil || math.IsNaN(f) || f < lo || f > hi {
		return 0, p.fail(join(path, key), fmt.Sprintf("is not a number from %s to %s", num(lo), num(hi)), "write a number in that range")
	}
	return f, nil
}

// array reads an optional array member.
func (p *fileParser) array(m map[string]json.RawMessage, path, key string, limit int) ([]json.RawMessage, error) {
	raw, ok := m[key]
	if !ok {
		return nil, nil
	}
	var a []json.RawMessage
	if err := event.UnmarshalExact(raw, &a); err != nil {
		return nil, p.fail(join(path, key), "is not an array", "write it as a JSON array […]")
	}
	if len(a) > limit {
		return nil, p.fail(join(path, key), fmt.Sprintf("has %d entries, at most %d are allowed", len(a), limit), "split the suite")
	}
	return a, nil
}
