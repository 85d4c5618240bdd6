package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// conformancePage is the spec conformance index, by path from the
// repository root.
const conformancePage = "docs/conformance.md"

// conformanceColumns are the header cells every table of the page has, in
// order.
var conformanceColumns = []string{"clause", "what it says", "tests", "status"}

var (
	// citedTest is one entry of the tests column: `TestName` (package dir).
	citedTest = regexp.MustCompile("`(Test[A-Za-z0-9_]*)` \\(([^()\\s]+)\\)")
	// anyTest is a backticked test name, cited properly or not.
	anyTest = regexp.MustCompile("`Test[A-Za-z0-9_]*`")
	// statedCounts is the intro's tally of the tables.
	statedCounts = regexp.MustCompile(`(\d+) clauses: (\d+) cited, (\d+) partly, (\d+) missing`)
)

// clauseRow is one row of a table of the page.
type clauseRow struct {
	line   int // 1-based line in the page
	clause string
	tests  []citation
	status string // cited, partly or missing
	note   string // what follows the status word
}

// citation is one test a row lists: its name and its package directory
// from the repository root ("." for the root package).
type citation struct {
	name, dir string
}

func (r clauseRow) String() string {
	return fmt.Sprintf("%s:%d: clause %s", conformancePage, r.line, r.clause)
}

// tableCells splits a Markdown table row into its trimmed cells.
func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// conformanceRows reads the rows of every table of the page. A table starts
// with a header of conformanceColumns; a row that does not fit its table is
// an error.
func conformanceRows(t *testing.T, page string) []clauseRow {
	t.Helper()
	var (
		rows     []clauseRow
		inTable  bool
		sawRule  bool
		header   = strings.Join(conformanceColumns, "|")
		statuses = map[string]bool{"cited": true, "partly": true, "missing": true}
	)
	for i, line := range strings.Split(page, "\n") {
		n := i + 1
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			inTable, sawRule = false, false
			continue
		}
		cells := tableCells(line)
		switch {
		case !inTable:
			if strings.Join(cells, "|") != header {
				t.Errorf("%s:%d: a table whose header is not %q", conformancePage, n, conformanceColumns)
			}
			inTable = true
			continue
		case !sawRule:
			sawRule = true // the |---| line under the header
			continue
		}
		if len(cells) != len(conformanceColumns) {
			t.Errorf("%s:%d: a row of %d cells, want %d", conformancePage, n, len(cells), len(conformanceColumns))
			continue
		}
		r := clauseRow{line: n, clause: strings.Trim(cells[0], "`")}
		for _, m := range citedTest.FindAllStringSubmatch(cells[2], -1) {
			r.tests = append(r.tests, citation{name: m[1], dir: m[2]})
		}
		if all := len(anyTest.FindAllString(cells[2], -1)); all != len(r.tests) {
			t.Errorf("%s: %d of the tests it lists have no package in parentheses after them", r, all-len(r.tests))
		}
		word, note, _ := strings.Cut(cells[3], ":")
		r.status, r.note = strings.TrimSpace(word), strings.TrimSpace(note)
		if !statuses[r.status] {
			t.Errorf("%s: status %q, want cited, partly or missing", r, cells[3])
		}
		rows = append(rows, r)
	}
	return rows
}

// testFuncs returns the names of the top-level functions declared in the
// _test.go files of dir (a directory from the repository root).
func testFuncs(fset *token.FileSet, dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(dir), "*_test.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no _test.go file in %s", dir)
	}
	funcs := map[string]bool{}
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = true
			}
		}
	}
	return funcs, nil
}

// TestConformanceIndexNamesRealTests checks docs/conformance.md against the
// code: every test a row lists is a top-level func of a _test.go file in
// the package directory named beside it; a cited or partly row lists a
// test and a missing one none; a partly row says what is missing; clause
// ids are unique; and the counts the intro states are the tables' counts.
// Whether a test checks what its row says is for a reader to judge.
func TestConformanceIndexNamesRealTests(t *testing.T) {
	page := read(t, conformancePage)
	rows := conformanceRows(t, page)
	if len(rows) == 0 {
		t.Fatalf("%s: no clause rows found", conformancePage)
	}
	var (
		fset   = token.NewFileSet()
		byDir  = map[string]map[string]bool{}
		seen   = map[string]int{} // clause id: its line
		counts = map[string]int{}
	)
	for _, r := range rows {
		counts[r.status]++
		if prev, dup := seen[r.clause]; dup {
			t.Errorf("%s: the id is also used at line %d", r, prev)
		}
		seen[r.clause] = r.line
		switch {
		case r.status == "missing" && len(r.tests) > 0:
			t.Errorf("%s: marked missing but lists %s", r, r.tests[0].name)
		case r.status != "missing" && len(r.tests) == 0:
			t.Errorf("%s: marked %s but lists no test", r, r.status)
		case r.status == "partly" && r.note == "":
			t.Errorf("%s: marked partly without saying what is missing (partly: …)", r)
		}
		for _, c := range r.tests {
			if c.dir != path.Clean(c.dir) || path.IsAbs(c.dir) || strings.HasPrefix(c.dir, "..") {
				t.Errorf("%s: package %q is not a clean path from the repository root", r, c.dir)
				continue
			}
			funcs, ok := byDir[c.dir]
			if !ok {
				var err error
				if funcs, err = testFuncs(fset, c.dir); err != nil {
					if _, statErr := os.Stat(filepath.Join("..", filepath.FromSlash(c.dir))); statErr != nil {
						err = fmt.Errorf("no directory %s", c.dir)
					}
					t.Errorf("%s lists %s (%s): %v", r, c.name, c.dir, err)
				}
				byDir[c.dir] = funcs
			}
			if funcs != nil && !funcs[c.name] {
				t.Errorf("%s lists %s (%s), but no _test.go file in %s declares func %s(", r, c.name, c.dir, c.dir, c.name)
			}
		}
	}
	m := statedCounts.FindStringSubmatch(page)
	if m == nil {
		t.Errorf("%s: the intro does not state the counts as %q", conformancePage, "N clauses: C cited, P partly, M missing")
	} else {
		want := []int{len(rows), counts["cited"], counts["partly"], counts["missing"]}
		for i, s := range m[1:] {
			if got, _ := strconv.Atoi(s); got != want[i] {
				t.Errorf("%s: the intro states %q; the tables hold %d clauses: %d cited, %d partly, %d missing",
					conformancePage, m[0], want[0], want[1], want[2], want[3])
				break
			}
		}
	}
	t.Logf("%s: %d clauses (%d cited, %d partly, %d missing), tests looked up in %d packages",
		conformancePage, len(rows), counts["cited"], counts["partly"], counts["missing"], len(byDir))
}
