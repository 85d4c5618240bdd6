package loomvet

import (
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// directive is the annotation that silences loomvet on a line: written
// "//loomvet:ok <reason>" on the reported line or the line above.
const directive = "loomvet:ok"

// orderMarkers are the comments the kernel's own purity guard accepts on
// a range over a map (spec/purity_test.go); loomvet accepts them, with a
// reason, for the map-order check only, so code vetted for one is vetted
// for both.
var orderMarkers = []string{"loom:sorted", "loom:order-independent"}

// lineKey names a line of a file (positions are the file's own, not those
// a //line directive maps them to, since comments are read there too).
type lineKey struct {
	file string
	line int
}

// reporter reports each finding once, unless an annotation silences it.
type reporter struct {
	pass    *analysis.Pass
	ok      map[lineKey]bool // lines with a //loomvet:ok and a reason
	ordered map[lineKey]bool // lines with an order marker and a reason
	seen    map[token.Pos]map[string]bool
}

// newReporter reads the annotations of the package's files, and reports
// each //loomvet:ok without a reason (which silences nothing).
func newReporter(pass *analysis.Pass) *reporter {
	r := &reporter{pass: pass, ok: map[lineKey]bool{}, ordered: map[lineKey]bool{}, seen: map[token.Pos]map[string]bool{}}
	for _, f := range pass.Files {
		for _, group := range f.Comments {
			for _, c := range group.List {
				r.read(c)
			}
		}
	}
	return r
}

// read records the annotation c is, if it is one.
func (r *reporter) read(c *ast.Comment) {
	text, line := strings.TrimPrefix(c.Text, "//"), r.line(c.Pos())
	if text == c.Text {
		return // a /* */ comment
	}
	if reason, ok := annotation(text, directive); ok {
		if reason == "" {
			r.pass.Report(analysis.Diagnostic{Pos: c.Pos(), End: c.End(), Category: catAnnotation,
				Message: "//loomvet:ok needs a reason: say why the line is deterministic (//loomvet:ok <reason>); without one it silences nothing"})
			return
		}
		r.ok[line] = true
		return
	}
	for _, m := range orderMarkers {
		if reason, ok := annotation(text, m); ok && reason != "" {
			r.ordered[line] = true
		}
	}
}

// annotation reports whether the comment text (after its //) is the
// annotation name, and returns its reason: the text after the name, up to
// a further // (a second comment on the line is not a reason).
func annotation(text, name string) (reason string, ok bool) {
	rest, ok := strings.CutPrefix(text, name)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	rest, _, _ = strings.Cut(rest, "//")
	return strings.TrimSpace(rest), true
}

func (r *reporter) line(pos token.Pos) lineKey {
	p := r.pass.Fset.PositionFor(pos, false)
	return lineKey{p.Filename, p.Line}
}

// silenced reports whether an annotation covers a finding of category at
// pos: one on its line or the line above.
func (r *reporter) silenced(pos token.Pos, category string) bool {
	at := r.line(pos)
	above := lineKey{at.file, at.line - 1}
	if r.ok[at] || r.ok[above] {
		return true
	}
	return category == catMapOrder && (r.ordered[at] || r.ordered[above])
}

// report reports a finding of category at pos, once per position and
// category, unless an annotation silences it.
func (r *reporter) report(pos token.Pos, category, message string) {
	if r.seen[pos][category] || r.silenced(pos, category) {
		return
	}
	if r.seen[pos] == nil {
		r.seen[pos] = map[string]bool{}
	}
	r.seen[pos][category] = true
	r.pass.Report(analysis.Diagnostic{Pos: pos, Category: category, Message: message})
}
