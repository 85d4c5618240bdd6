package effect

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxPatternBytes caps a glob pattern's length in bytes. A longer pattern is
// refused when it is compiled (CompileGlob, GrantTable.Grant,
// NewPolicyAuthorizer) with a *PatternError, so the cost of one match is
// bounded by the subject's length times this constant.
const MaxPatternBytes = 256

// ErrInvalidPattern is matched (errors.Is) by every *PatternError.
var ErrInvalidPattern = errors.New("effect: invalid glob pattern")

// PatternError refuses a glob pattern at construction: it is empty, longer
// than MaxPatternBytes, or not valid UTF-8. Pattern is clipped to its first
// 32 bytes in the message.
type PatternError struct {
	Pattern string
	Reason  string
}

func (e *PatternError) Error() string {
	return "effect: invalid glob pattern " + strconv.Quote(clip(e.Pattern, 32)) + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidPattern) true.
func (e *PatternError) Is(target error) bool { return target == ErrInvalidPattern }

// Glob is a compiled glob pattern over tool ids, tenants and step ids. The
// syntax has exactly two metacharacters, and no escape:
//
//	'*' matches any run of characters, including none
//	'?' matches exactly one character (one Unicode code point)
//
// Every other character, '/', '[', '\' and '.' included, matches only
// itself. A byte of the subject that is not valid UTF-8 counts as one
// character that only '?' or '*' matches.
//
// Matching never backtracks: the pattern is split at its stars, the first
// piece must be a prefix, the last a suffix, and each middle piece is found
// at its leftmost position after the previous one (taking the leftmost
// occurrence never loses a match, so this greedy scan is exact). A middle
// piece is searched with the bit-parallel Shift-And automaton, which reads
// each character once whatever '?' the piece holds, and the pieces scan
// disjoint stretches of the subject: a match costs
// O(len(pattern) + len(subject)·MaxPatternBytes/64) word operations —
// linear in the subject, for any pattern shape.
//
// The zero Glob matches only the empty string; build one with CompileGlob.
type Glob struct {
	pattern string
	// pieces are the pattern's runs between stars; there is one more piece
	// than stars, and empty pieces between adjacent stars are kept (they
	// match trivially).
	pieces []piece
}

// maxPieceWords is how many 64-bit words the longest piece's Shift-And
// state takes: a piece has at most MaxPatternBytes characters.
const maxPieceWords = MaxPatternBytes / 64

// piece is a star-free run of a pattern with its Shift-And tables: bit i of
// masks[c] is set when the piece's i-th character is c or '?', and bit i of
// wild when it is '?' (the mask of every character the piece never names).
type piece struct {
	runes []rune
	masks map[rune][maxPieceWords]uint64
	wild  [maxPieceWords]uint64
}

// newPiece builds a piece; only a middle piece (searched) gets the tables,
// a first or last one is only compared in place.
func newPiece(s string, searched bool) piece {
	p := piece{runes: []rune(s)}
	if !searched {
		return p
	}
	p.masks = make(map[rune][maxPieceWords]uint64, len(p.runes))
	for i, c := range p.runes {
		if c == '?' {
			p.wild[i/64] |= 1 << (i % 64)
		}
	}
	for i, c := range p.runes {
		if c == '?' {
			continue
		}
		m, ok := p.masks[c]
		if !ok {
			m = p.wild
		}
		m[i/64] |= 1 << (i % 64)
		p.masks[c] = m
	}
	return p
}

// CompileGlob compiles pattern. It refuses an empty pattern, one longer than
// MaxPatternBytes, and one that is not valid UTF-8, with a *PatternError.
func CompileGlob(pattern string) (Glob, error) {
	switch {
	case pattern == "":
		return Glob{}, &PatternError{Pattern: pattern, Reason: "empty"}
	case len(pattern) > MaxPatternBytes:
		return Glob{}, &PatternError{Pattern: pattern, Reason: "longer than " + strconv.Itoa(MaxPatternBytes) + " bytes"}
	case !utf8.ValidString(pattern):
		return Glob{}, &PatternError{Pattern: pattern, Reason: "not valid UTF-8"}
	}
	parts := strings.Split(pattern, "*")
	g := Glob{pattern: pattern, pieces: make([]piece, len(parts))}
	for i, p := range parts {
		g.pieces[i] = newPiece(p, i > 0 && i < len(parts)-1)
	}
	return g, nil
}

// String returns the pattern g was compiled from.
func (g Glob) String() string { return g.pattern }

// Match reports whether s matches the whole pattern.
func (g Glob) Match(s string) bool { return g.match(decode(s)) }

// match is Match over a subject already decoded by decode, so an authorizer
// decodes each request field once for all its patterns.
func (g Glob) match(r []rune) bool {
	if len(g.pieces) <= 1 { // no star: the subject must match the one piece exactly
		var p []rune
		if len(g.pieces) == 1 {
			p = g.pieces[0].runes
		}
		return len(p) == len(r) && pieceMatch(p, r)
	}
	first, last := g.pieces[0].runes, g.pieces[len(g.pieces)-1].runes
	if len(r) < len(first)+len(last) {
		return false
	}
	if !pieceMatch(first, r[:len(first)]) || !pieceMatch(last, r[len(r)-len(last):]) {
		return false
	}
	rest := r[len(first) : len(r)-len(last)]
	for i := 1; i < len(g.pieces)-1; i++ {
		at := g.pieces[i].index(rest)
		if at < 0 {
			return false
		}
		rest = rest[at+len(g.pieces[i].runes):]
	}
	return true
}

// invalidByte stands for a subject byte that is not valid UTF-8. Pattern
// runes are never negative, so only '?' matches it.
const invalidByte rune = -1

// decode splits s into characters, one invalidByte per byte that is not
// valid UTF-8.
func decode(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c, n := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && n == 1 {
			c = invalidByte
		}
		out = append(out, c)
		i += n
	}
	return out
}

// pieceMatch reports whether the star-free piece p matches r, which has the
// same length.
func pieceMatch(p, r []rune) bool {
	for i, c := range p {
		if c != '?' && c != r[i] {
			return false
		}
	}
	return true
}

// index returns the leftmost position in r at which p matches, or -1. It is
// the Shift-And automaton: bit i of the state is set when the last i+1
// characters read match p's first i+1, so it reads each character of r once,
// at a cost of one mask lookup and len(p)/64+1 word operations.
func (p *piece) index(r []rune) int {
	n := len(p.runes)
	if n == 0 {
		return 0
	}
	words, top, topBit := (n+63)/64, (n-1)/64, uint64(1)<<((n-1)%64)
	var state [maxPieceWords]uint64
	for i, c := range r {
		mask, ok := p.masks[c]
		if !ok {
			mask = p.wild
		}
		carry := uint64(1) // a match may start at every position
		for w := 0; w < words; w++ {
			next := state[w] >> 63
			state[w] = (state[w]<<1 | carry) & mask[w]
			carry = next
		}
		if state[top]&topBit != 0 {
			return i - n + 1
		}
	}
	return -1
}

// clip shortens s to at most n bytes (on a rune boundary) for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
