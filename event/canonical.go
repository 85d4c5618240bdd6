package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
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
//
// Input RFC 8785 leaves undefined is read as JavaScript reads it: a repeated
// object key keeps its last value (JSON.parse), and a lone surrogate escape
// such as "\ud800" is kept and printed as JSON.stringify prints it.
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
	first := true
	for i, m := range members {
		// A repeated key keeps its last value, as JSON.parse (and
		// encoding/json) read it; the stable sort put that one last.
		if i+1 < len(members) && members[i+1].key == m.key {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
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

// str reads the JSON string at pos and returns its value.
//
// A lone UTF-16 surrogate escape (\ud800 with no partner) has no UTF-8 form.
// Rather than replace it with U+FFFD, which would change the value, it is kept
// as the three bytes UTF-8 would give its code point (ED A0..BF xx), a
// sequence valid UTF-8 never holds: writeString prints it back as the escape
// and lessUTF16 orders it as the code unit, as JSON.stringify and JavaScript do.
func (c *canon) str() string {
	c.pos++ // opening quote
	start := c.pos
	for c.src[c.pos] != '"' && c.src[c.pos] != '\\' {
		c.pos++
	}
	if c.src[c.pos] == '"' {
		c.pos++
		return string(c.src[start : c.pos-1])
	}
	buf := append([]byte(nil), c.src[start:c.pos]...)
	for {
		ch := c.src[c.pos]
		switch ch {
		case '"':
			c.pos++
			return string(buf)
		case '\\':
			buf = c.escape(buf)
		default:
			buf = append(buf, ch)
			c.pos++
		}
	}
}

// escape decodes the escape sequence at pos (json.Valid vouched for it).
func (c *canon) escape(buf []byte) []byte {
	esc := c.src[c.pos+1]
	c.pos += 2
	switch esc {
	case 'b':
		return append(buf, '\b')
	case 'f':
		return append(buf, '\f')
	case 'n':
		return append(buf, '\n')
	case 'r':
		return append(buf, '\r')
	case 't':
		return append(buf, '\t')
	case '"', '\\', '/':
		return append(buf, esc)
	}
	// \uXXXX, possibly the high half of a surrogate pair.
	r := hex4(c.src[c.pos:])
	c.pos += 4
	if !utf16.IsSurrogate(r) {
		return utf8.AppendRune(buf, r)
	}
	if r < 0xdc00 && c.pos+6 <= len(c.src) && c.src[c.pos] == '\\' && c.src[c.pos+1] == 'u' {
		if lo := hex4(c.src[c.pos+2:]); lo >= 0xdc00 && lo <= 0xdfff {
			c.pos += 6
			return utf8.AppendRune(buf, utf16.DecodeRune(r, lo))
		}
	}
	return append(buf, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
}

func hex4(b []byte) rune {
	var r rune
	for _, ch := range b[:4] {
		r <<= 4
		switch {
		case ch <= '9':
			r |= rune(ch - '0')
		case ch >= 'a':
			r |= rune(ch-'a') + 10
		default:
			r |= rune(ch-'A') + 10
		}
	}
	return r
}

// loneSurrogate reports whether s[i:] starts with a lone surrogate kept by
// str, and returns its code unit.
func loneSurrogate(s string, i int) (rune, bool) {
	if i+2 < len(s) && s[i] == 0xed && s[i+1] >= 0xa0 {
		return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), true
	}
	return 0, false
}

// lessUTF16 orders keys by UTF-16 code units, as JCS (and JavaScript) do.
func lessUTF16(a, b string) bool {
	if isASCII(a) && isASCII(b) {
		return a < b
	}
	ua, ub := utf16Units(a), utf16Units(b)
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func utf16Units(s string) []uint16 {
	u := make([]uint16, 0, len(s))
	for i := 0; i < len(s); {
		if r, ok := loneSurrogate(s, i); ok {
			u = append(u, uint16(r))
			i += 3
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		u = utf16.AppendRune(u, r)
		i += n
	}
	return u
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
// control characters below U+0020; a lone surrogate kept by str is printed
// as its \udxxx escape, as JSON.stringify does.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if r, ok := loneSurrogate(s, i); ok {
			out.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				out.WriteByte(hexDigits[r>>shift&0xf])
			}
			i += 2
			continue
		}
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
	if sameDecimal(lit, js) {
		return js
	}
	return lit
}

// sameDecimal reports whether two JSON number literals denote the same
// value. It compares their normalized digits and exponents, in time linear in
// their length whatever the exponent (big.Rat would expand 1e-999999).
func sameDecimal(a, b string) bool {
	na, ea, okA := decimalParts(a)
	nb, eb, okB := decimalParts(b)
	if !okA || !okB {
		return false
	}
	if na == "" || nb == "" { // zero, whatever its sign or exponent
		return na == nb
	}
	return na == nb && ea == eb
}

// decimalParts splits a JSON number literal into its sign and significant
// digits (no leading or trailing zeros; "" for zero) and the exponent of the
// last digit. ok is false when the exponent does not fit an int64.
func decimalParts(lit string) (digits string, exp int64, ok bool) {
	sign := ""
	if strings.HasPrefix(lit, "-") {
		sign, lit = "-", lit[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	d := strings.TrimLeft(intPart+frac, "0")
	if d == "" {
		return "", 0, true
	}
	if hasExp {
		e, err := strconv.ParseInt(expPart, 10, 64)
		if err != nil {
			return "", 0, false
		}
		exp = e
	}
	trimmed := strings.TrimRight(d, "0")
	shift := int64(len(d)-len(trimmed)) - int64(len(frac))
	if (shift > 0 && exp > math.MaxInt64-shift) || (shift < 0 && exp < math.MinInt64-shift) {
		return "", 0, false
	}
	return sign + trimmed, exp + shift, true
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
