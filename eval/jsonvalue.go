package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loom-kernel/loom/event"
)

// canonical is raw in canonical JSON (sorted keys, JavaScript numbers), or
// raw itself when it is not JSON; absent is null. Two values are the same
// JSON exactly when their canonical forms are equal.
func canonical(raw json.RawMessage) json.RawMessage {
	c, err := event.Canonical(raw)
	if err != nil {
		return raw
	}
	return c
}

// sameJSON reports whether a and b are the same JSON value (member order
// and insignificant whitespace aside; absent equals null).
func sameJSON(a, b json.RawMessage) bool {
	return bytes.Equal(canonical(a), canonical(b))
}

// errNoSuchPointer is what lookup returns for a pointer the value lacks.
var errNoSuchPointer = errors.New("eval: no value at the pointer")

// lookup returns the value at the JSON Pointer (RFC 6901) ptr of raw:
// "" is the whole value, "/a/0" member a's first element. A pointer that
// names nothing fails with an error wrapping errNoSuchPointer.
func lookup(raw json.RawMessage, ptr string) (json.RawMessage, error) {
	if ptr == "" {
		if len(raw) == 0 {
			return json.RawMessage("null"), nil
		}
		return raw, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("eval: JSON pointer %q must start with / (or be empty for the whole value)", ptr)
	}
	cur := raw
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		next, ok := child(cur, tok)
		if !ok {
			return nil, fmt.Errorf("%w %s", errNoSuchPointer, ptr)
		}
		cur = next
	}
	return cur, nil
}

// child is member tok of an object, or element tok of an array.
func child(raw json.RawMessage, tok string) (json.RawMessage, bool) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, false
	}
	switch trimmed[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(trimmed, &m) != nil {
			return nil, false
		}
		v, ok := m[tok]
		return v, ok
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(trimmed, &a) != nil {
			return nil, false
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(a) || (len(tok) > 1 && tok[0] == '0') {
			return nil, false
		}
		return a[i], true
	}
	return nil, false
}

// text is a JSON string's content, or any other value as compact JSON:
// what a regex matches against.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(canonical(raw))
}

// clip shortens s for a reason or a report line, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// mustJSON encodes a value the package built itself.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("eval: encoding a value of its own: " + err.Error())
	}
	return b
}
