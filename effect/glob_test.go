package effect

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		subject string
		want    bool
	}{
		{"exact literal matches itself", "fs.read", "fs.read", true},
		{"literal is anchored at the end", "fs.read", "fs.readall", false},
		{"literal is anchored at the start", "fs.read", "xfs.read", false},
		{"dot is a literal", "a.b", "axb", false},
		{"matching is case-sensitive", "Mail", "mail", false},
		{"star matches an empty run", "mail.*", "mail.", true},
		{"star matches a long run", "mail.*", "mail.send.bulk", true},
		{"star crosses a slash", "a*", "a/b/c", true},
		{"lone star matches the empty string", "*", "", true},
		{"lone star matches anything", "*", "any thing/at all", true},
		{"adjacent stars are one star", "a**b", "ab", true},
		{"adjacent stars match a run", "a**b", "axyzb", true},
		{"star suffix pattern", "*.read", "fs.read", true},
		{"star suffix pattern is anchored", "*.read", "fs.read.all", false},
		{"question mark is one character", "a?c", "abc", true},
		{"question mark is not zero characters", "a?c", "ac", false},
		{"question mark is not two characters", "a?c", "abbc", false},
		{"question mark is one code point", "?", "é", true},
		{"two question marks are not one code point", "??", "é", false},
		{"question mark matches an invalid byte", "a?", "a\xff", true},
		{"star matches invalid bytes", "*", "\xff\xfe", true},
		{"a literal U+FFFD does not match an invalid byte", "\uFFFD", "\xff", false},
		{"a literal U+FFFD matches itself", "\uFFFD", "\uFFFD", true},
		{"brackets are literals", "[ab]", "[ab]", true},
		{"brackets are not a class", "[ab]", "a", false},
		{"backslash is a literal, not an escape", `a\*`, `a\x`, true},
		{"backslash does not escape a star", `a\*`, "a*", false},
		{"prefix and suffix may not overlap", "ab*ba", "aba", false},
		{"prefix and suffix meet", "ab*ba", "abba", true},
		{"middle pieces must appear in order", "*a*b*", "ba", false},
		{"middle pieces in order", "*a*b*", "xaybz", true},
		{"middle piece with a question mark", "*a?c*", "xxabcyy", true},
		{"leftmost middle piece leaves room for the suffix", "*ab*abc", "ababc", true},
		{"middle piece must fit before the suffix", "x*abc*c", "xabc", false},
		{"unicode literal", "tool.é*", "tool.éclair", true},
		{"middle piece spanning state words", "*" + strings.Repeat("a", 64) + "?" + strings.Repeat("a", 64) + "b*",
			"xx" + strings.Repeat("a", 70) + "é" + strings.Repeat("a", 64) + "b", true},
		{"middle piece spanning state words, last character wrong", "*" + strings.Repeat("a", 129) + "b*",
			strings.Repeat("a", 300) + "c", false},
		{"middle piece of the maximal length", "*" + strings.Repeat("?", MaxPatternBytes-3) + "b*",
			strings.Repeat("a", MaxPatternBytes) + "b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := CompileGlob(tt.pattern)
			if err != nil {
				t.Fatalf("CompileGlob(%q): %v", tt.pattern, err)
			}
			if got := g.Match(tt.subject); got != tt.want {
				t.Fatalf("CompileGlob(%q).Match(%q) = %v, want %v", tt.pattern, tt.subject, got, tt.want)
			}
			if g.String() != tt.pattern {
				t.Fatalf("String() = %q, want %q", g.String(), tt.pattern)
			}
		})
	}
}

func TestZeroGlobMatchesOnlyEmpty(t *testing.T) {
	var g Glob
	if !g.Match("") || g.Match("a") {
		t.Fatalf("zero Glob: Match(\"\")=%v Match(\"a\")=%v, want true, false", g.Match(""), g.Match("a"))
	}
}

func TestCompileGlobRefuses(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		reason  string
	}{
		{"empty pattern", "", "empty"},
		{"one byte over the limit", strings.Repeat("a", MaxPatternBytes+1), "longer than"},
		{"invalid UTF-8", "tool.\xff", "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileGlob(tt.pattern)
			if !errors.Is(err, ErrInvalidPattern) {
				t.Fatalf("CompileGlob: err = %v, want ErrInvalidPattern", err)
			}
			var pe *PatternError
			if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tt.reason) {
				t.Fatalf("CompileGlob: err = %#v, want a *PatternError with reason %q", err, tt.reason)
			}
			if len(err.Error()) > 120 {
				t.Fatalf("message not clipped: %d bytes", len(err.Error()))
			}
		})
	}
	t.Run("exactly at the limit", func(t *testing.T) {
		if _, err := CompileGlob(strings.Repeat("a", MaxPatternBytes)); err != nil {
			t.Fatalf("a %d-byte pattern: %v", MaxPatternBytes, err)
		}
	})
}

// TestGlobAdversarialCompletes runs patterns that make a backtracking
// matcher exponential or quadratic in the number of stars against long
// subjects; the matcher has no backtracking across stars, so each completes
// (the test's timeout is the only bound, never a wall-clock threshold).
func TestGlobAdversarialCompletes(t *testing.T) {
	long := strings.Repeat("a", 200_000)
	tests := []struct {
		name    string
		pattern string
		want    bool
	}{
		{"many stars and a missing suffix", strings.Repeat("a*", 127) + "b", false},
		{"many stars and a missing middle piece", strings.Repeat("a*", 126) + "b*a", false},
		{"many stars that match", strings.Repeat("*a", MaxPatternBytes/2), true},
		{"a long middle piece that almost matches everywhere", "*" + strings.Repeat("a", 200) + "b*", false},
		{"question marks that almost match everywhere", "*" + strings.Repeat("?", 200) + "b*", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := CompileGlob(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Match(long); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGlobMatchesReference checks the star-splitting matcher against the
// textbook dynamic program on random patterns and subjects.
func TestGlobMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pattern := rapid.StringOfN(rapid.RuneFrom([]rune("ab*?é")), 1, 8, -1).Draw(t, "pattern")
		subject := rapid.SampledFrom([]string{"", "a", "b", "é", "\xff"}).Draw(t, "first") +
			rapid.StringOfN(rapid.RuneFrom([]rune("abé")), 0, 10, -1).Draw(t, "rest")
		g, err := CompileGlob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := g.Match(subject), referenceMatch(pattern, subject); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, subject, got, want)
		}
	})
}

// TestGlobMatchesReferenceLongPieces does the same with middle pieces long
// enough to span several Shift-And state words, against subjects built from
// the pieces (so about half match) and then perhaps corrupted.
func TestGlobMatchesReferenceLongPieces(t *testing.T) {
	piece := rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(0, 120).Draw(t, "len") // rapid keeps a bare StringOfN short
		return rapid.StringOfN(rapid.RuneFrom([]rune("aaaaaaaaaaaaa?b")), n, n, -1).Draw(t, "piece")
	})
	rapid.Check(t, func(t *rapid.T) {
		pieces := rapid.SliceOfN(piece, 3, 4).Draw(t, "pieces")
		pattern := strings.Join(pieces, "*")
		if len(pattern) > MaxPatternBytes {
			pattern = pattern[:MaxPatternBytes]
		}
		var b strings.Builder
		for i, p := range strings.Split(pattern, "*") {
			if i > 0 {
				b.WriteString(rapid.StringOfN(rapid.RuneFrom([]rune("ab")), 0, 70, -1).Draw(t, "fill"))
			}
			b.WriteString(strings.ReplaceAll(p, "?", "a"))
		}
		subject := []byte(b.String())
		if len(subject) > 0 && rapid.Bool().Draw(t, "corrupt") {
			subject[rapid.IntRange(0, len(subject)-1).Draw(t, "at")] = 'c'
		}
		g, err := CompileGlob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := g.Match(string(subject)), referenceMatch(pattern, string(subject)); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, subject, got, want)
		}
	})
}

// referenceMatch is the O(n·m) dynamic program over characters, an invalid
// byte being one character that only '?' and '*' match.
func referenceMatch(pattern, subject string) bool {
	var s []rune
	for i := 0; i < len(subject); {
		c, n := utf8.DecodeRuneInString(subject[i:])
		if c == utf8.RuneError && n == 1 {
			c = -1
		}
		s = append(s, c)
		i += n
	}
	// ok[j] reports whether p[:i] matches s[:j], row by row.
	ok := make([]bool, len(s)+1)
	ok[0] = true
	for _, c := range pattern {
		next := make([]bool, len(s)+1)
		if c == '*' {
			next[0] = ok[0]
		}
		for j := 1; j <= len(s); j++ {
			switch c {
			case '*':
				next[j] = ok[j] || next[j-1]
			case '?':
				next[j] = ok[j-1]
			default:
				next[j] = ok[j-1] && s[j-1] == c
			}
		}
		ok = next
	}
	return ok[len(s)]
}
