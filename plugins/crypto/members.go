package crypto

import (
	"bytes"
	"encoding/json"
	"errors"
)

// member is one top-level member of a JSON object payload: its decoded
// name and the byte span [start, end) of its value in the raw payload.
type member struct {
	name       string
	start, end int
}

// errNotJSON reports bytes the member scanner cannot read; payloads reach
// it only after event.Validate, so it means a store returned bad bytes.
var errNotJSON = errors.New("crypto: payload is not valid JSON")

// objectMembers returns the top-level members of b in order, duplicates
// included, or ok false when b is not a JSON object. Spans point into b, so
// a rewrite of some values keeps every other byte (whitespace, key order,
// number text) exactly as it was.
func objectMembers(b []byte) (ms []member, ok bool, err error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false, nil
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil, true, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, true, errNotJSON
		}
		keyEnd, err := skipString(b, i)
		if err != nil {
			return nil, true, err
		}
		name, err := decodeKey(b[i:keyEnd])
		if err != nil {
			return nil, true, err
		}
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return nil, true, errNotJSON
		}
		start := skipSpace(b, i+1)
		end, err := skipValue(b, start)
		if err != nil {
			return nil, true, err
		}
		ms = append(ms, member{name: name, start: start, end: end})
		i = skipSpace(b, end)
		if i >= len(b) {
			return nil, true, errNotJSON
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return ms, true, nil
		default:
			return nil, true, errNotJSON
		}
	}
}

func decodeKey(raw []byte) (string, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errNotJSON
	}
	return s, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errNotJSON
}

// skipValue returns the index just past the value starting at b[i]. Nested
// containers are skipped by depth, strings by their quotes; the payload was
// validated before, so scalars end at the first delimiter.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errNotJSON
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errNotJSON
	}
	j := i
	for j < len(b) && !isDelimiter(b[j]) {
		j++
	}
	if j == i {
		return 0, errNotJSON
	}
	return j, nil
}

// splice replaces the spans of b, ascending and disjoint, by their
// replacements.
func splice(b []byte, spans []member, repl [][]byte) []byte {
	size := len(b)
	for k, m := range spans {
		size += len(repl[k]) - (m.end - m.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for k, m := range spans {
		out = append(out, b[at:m.start]...)
		out = append(out, repl[k]...)
		at = m.end
	}
	return append(out, b[at:]...)
}

func isDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', '}', ']':
		return true
	}
	return false
}
