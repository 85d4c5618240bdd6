package sqlite

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
)

// errCorruptMetadata reports a metadata column this package did not write.
var errCorruptMetadata = errors.New("sqlite: corrupt metadata column")

// encodeMetadata renders m as a JSON object with sorted keys whose values
// are the raw bytes given, untouched: no compaction, no re-escaping, so
// decodeMetadata returns exactly what was appended.
func encodeMetadata(m map[string]json.RawMessage) string {
	keys := make([]string, 0, len(m))
	size := 2
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// writeJSONString quotes s (valid UTF-8) with the escapes JSON requires.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// decodeMetadata parses what encodeMetadata wrote. Each value keeps its
// bytes, surrounding whitespace included.
func decodeMetadata(s string) (map[string]json.RawMessage, error) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, errCorruptMetadata
	}
	m := make(map[string]json.RawMessage)
	i := 1
	if s == "{}" {
		return m, nil
	}
	for {
		end := stringEnd(s, i)
		if end < 0 || end >= len(s) || s[end] != ':' {
			return nil, errCorruptMetadata
		}
		key := s[i+1 : end-1]
		if strings.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal([]byte(s[i:end]), &key); err != nil {
				return nil, errCorruptMetadata
			}
		}
		start := end + 1
		j := skipSpace(s, valueEnd(s, skipSpace(s, start)))
		if j < 0 || j >= len(s) || (s[j] != ',' && s[j] != '}') {
			return nil, errCorruptMetadata
		}
		m[key] = json.RawMessage(s[start:j])
		if s[j] == '}' {
			if j != len(s)-1 {
				return nil, errCorruptMetadata
			}
			return m, nil
		}
		i = j + 1
	}
}

// stringEnd returns the index just past the JSON string starting at s[i],
// or -1.
func stringEnd(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index just past the JSON value starting at s[i]
// (valid JSON, checked on append), or -1.
func valueEnd(s string, i int) int {
	if i < 0 || i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				if j = stringEnd(s, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[j])) && s[j] < utf8.RuneSelf {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// skipSpace returns the index of the first non-whitespace byte at or after
// i, or -1 when i is -1.
func skipSpace(s string, i int) int {
	if i < 0 {
		return -1
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}
