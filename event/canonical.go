package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotCanonicalizable is returned for input that is not valid UTF-8 JSON.
var ErrNotCanonicalizable = errors.New("event: not canonicalizable JSON")

// Canonical renders JSON in the canonical form digests are computed over:
// RFC 8785 (JCS) rules — object keys sorted by UTF-16 code units, no
// insignificant whitespace, minimal string escaping, numbers as JavaScript
// prints them — so a digest agrees with any wire-ABI implementation.
//
// One deliberate, documented departure keeps it lossless: a number literal
// that no float64 denotes exactly (an integer past 2^53, say) keeps its
// digits instead of being rounded, so a snapshot never changes a value.
func Canonical(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	if !utf8.Valid(raw) || !json.Valid(raw) {
		return nil, ErrNotCanonicalizable
	}
	c := canon{src: raw}
	var out bytes.Buffer
	out.Grow(len(raw))
	c.value(&out)
	if c.err != nil {
		return nil, c.err
	}
	return out.Bytes(), nil
}

// MustCanonical is Canonical for input already known to be valid JSON.
func MustCanonical(raw []byte) []byte {
	b, err := Canonical(raw)
	if err != nil {
		panic(err)
	}
	return b
}

// canon walks JSON that json.Valid accepted, so it only needs to track
// position, not report syntax errors.
type canon struct {
	src []byte
	pos int
	err error
}

func (c *canon) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canon) value(out *bytes.Buffer) {
	c.skipSpace()
	switch ch := c.src[c.pos]; {
	case ch == '{':
		c.object(out)
	case ch == '[':
		c.array(out)
	case ch == '"':
		s := c.str()
		writeString(out, s)
	case ch == 't':
		c.pos += 4
		out.WriteString("true")
	case ch == 'f':
		c.pos += 5
		out.WriteString("false")
	case ch == 'n':
		c.pos += 4
		out.WriteString("null")
	default:
		start := c.pos
		for c.pos < len(c.src) && strings.IndexByte("+-0123456789.eE", c.src[c.pos]) >= 0 {
			c.pos++
		}
		out.WriteString(canonicalNumber(string(c.src[start:c.pos])))
	}
}

type member struct {
	key string
	val []byte
}

func (c *canon) object(out *bytes.Buffer) {
	c.pos++ // {
	var members []member
	for {
		c.skipSpace()
		if c.src[c.pos] == '}' {
			c.pos++
			break
		}
		if c.src[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
		key := c.str()
		c.skipSpace()
		c.pos++ // :
		var v bytes.Buffer
		c.value(&v)
		members = append(members, member{key, v.Bytes()})
	}
	sort.SliceStable(members, func(i, j int) bool { return lessUTF16(members[i].key, members[j].key) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(m.val)
	}
	out.WriteByte('}')
}

func (c *canon) array(out *bytes.Buffer) {
	c.pos++ // [
	out.WriteByte('[')
	first := true
	for {
		c.skipSpace()
		if c.src[c.pos] == ']' {
			c.pos++
			break
		}
		if c.src[c.pos] == ',' {
			c.pos++
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		c.value(out)
	}
	out.WriteByte(']')
}

// str reads a JSON string at pos and returns its decoded value.
func (c *canon) str() string {
	start := c.pos
	c.pos++ // opening quote
	escaped := false
	for {
		ch := c.src[c.pos]
		if ch == '\\' {
			escaped = true
			c.pos += 2
			continue
		}
		c.pos++
		if ch == '"' {
			break
		}
	}
	if !escaped {
		return string(c.src[start+1 : c.pos-1])
	}
	var s string
	if err := json.Unmarshal(c.src[start:c.pos], &s); err != nil && c.err == nil {
		c.err = ErrNotCanonicalizable
	}
	return s
}

// lessUTF16 orders keys by UTF-16 code units, as JCS (and JavaScript) do.
func lessUTF16(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return a < b
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// writeString escapes only what JCS requires: the quote, the backslash and
// control characters below U+0020.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"':
			out.WriteString(`\"`)
		case ch == '\\':
			out.WriteString(`\\`)
		case ch >= 0x20:
			out.WriteByte(ch)
		case ch == '\b':
			out.WriteString(`\b`)
		case ch == '\t':
			out.WriteString(`\t`)
		case ch == '\n':
			out.WriteString(`\n`)
		case ch == '\f':
			out.WriteString(`\f`)
		case ch == '\r':
			out.WriteString(`\r`)
		default:
			out.WriteString(`\u00`)
			out.WriteByte(hexDigits[ch>>4])
			out.WriteByte(hexDigits[ch&0xf])
		}
	}
	out.WriteByte('"')
}

// canonicalNumber prints a JSON number literal as JavaScript would, unless
// that would change its value (then the literal is kept).
func canonicalNumber(lit string) string {
	isInt := !strings.ContainsAny(lit, ".eE")
	if isInt && len(lit) <= 16 {
		if lit == "-0" {
			return "0"
		}
		n, err := strconv.ParseInt(lit, 10, 64)
		if err == nil && n >= -(1<<53) && n <= 1<<53 {
			return lit
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return lit
	}
	js := FormatJSNumber(f)
	if js == lit {
		return js
	}
	a, okA := new(big.Rat).SetString(lit)
	b, okB := new(big.Rat).SetString(js)
	if okA && okB && a.Cmp(b) == 0 {
		return js
	}
	return lit
}

// FormatJSNumber renders a finite float64 as ECMAScript's Number::toString.
func FormatJSNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign = "-"
		f = -f
	}
	// Shortest round-trip digits d1.d2…dk and decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	var s string
	switch {
	case k <= n && n <= 21:
		s = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		s = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		s = digits[:1]
		if k > 1 {
			s += "." + digits[1:]
		}
		if n-1 >= 0 {
			s += "e+" + strconv.Itoa(n-1)
		} else {
			s += "e-" + strconv.Itoa(1-n)
		}
	}
	return sign + s
}
