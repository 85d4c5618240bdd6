package docs

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fragmentMarker, on the line before a ```go fence, says the block is an
// excerpt that is not meant to compile.
const fragmentMarker = "<!-- fragment -->"

// knownImports are the packages a declaration block may name without
// importing them: the test adds the import of each one the block uses.
var knownImports = map[string]string{
	"loom":       "github.com/loom-kernel/loom",
	"dispatch":   "github.com/loom-kernel/loom/dispatch",
	"effect":     "github.com/loom-kernel/loom/effect",
	"event":      "github.com/loom-kernel/loom/event",
	"fold":       "github.com/loom-kernel/loom/fold",
	"memstore":   "github.com/loom-kernel/loom/store/memstore",
	"middleware": "github.com/loom-kernel/loom/middleware",
	"postgres":   "github.com/loom-kernel/loom/plugins/postgres",
	"replay":     "github.com/loom-kernel/loom/replay",
	"schedule":   "github.com/loom-kernel/loom/schedule",
	"sqlite":     "github.com/loom-kernel/loom/plugins/sqlite",
	"store":      "github.com/loom-kernel/loom/store",
	"telemetry":  "github.com/loom-kernel/loom/telemetry",
	"wire":       "github.com/loom-kernel/loom/wire",
	"context":    "context",
	"errors":     "errors",
	"filepath":   "path/filepath",
	"fmt":        "fmt",
	"http":       "net/http",
	"json":       "encoding/json",
	"log":        "log",
	"os":         "os",
	"slog":       "log/slog",
	"strings":    "strings",
	"sync":       "sync",
	"testing":    "testing",
	"time":       "time",
}

// guides are the pages of the guided tour, which the README links.
var guides = []string{
	"docs/getting-started.md",
	"docs/testing.md",
	"docs/testing-your-flows.md",
	"docs/changing-flows.md",
	"docs/many-nodes.md",
	"docs/operating.md",
	"docs/production.md",
	"docs/lifecycle.md",
	"docs/agents.md",
	"docs/evals.md",
	"docs/protocols.md",
	"docs/glossary.md",
	"docs/internals.md",
	"docs/benchmarks.md",
}

// block is one ```go block of a Markdown file.
type block struct {
	file     string // the file's path from the repository root
	line     int    // the line of the block's first line of code
	code     string
	fragment bool
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// documents returns the Markdown files the tests read, by path from the
// repository root: README.md and docs/*.md.
func documents(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"README.md"}
	for _, n := range names {
		docs = append(docs, "docs/"+n)
	}
	return docs
}

// read returns the content of a file named by its path from the repository
// root (the test runs in docs/).
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// extract returns the ```go blocks of a Markdown file. A fence may be
// indented (a block in a list item); its indentation is removed from the
// block's lines.
func extract(t *testing.T, path string) []block {
	t.Helper()
	lines := strings.Split(read(t, path), "\n")
	var (
		blocks []block
		cur    *block
		indent string
		code   []string
		prev   string // the last non-blank line outside a block
	)
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.code = strings.Join(code, "\n") + "\n"
				blocks = append(blocks, *cur)
				cur, code, prev = nil, nil, trimmed
				continue
			}
			code = append(code, strings.TrimPrefix(line, indent))
			continue
		}
		if trimmed == "```go" {
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			cur = &block{file: path, line: i + 2, fragment: prev == fragmentMarker}
			prev = trimmed
			continue
		}
		if trimmed == fragmentMarker && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "```go" {
			t.Errorf("%s:%d: %s must be the line right before a ```go fence", path, i+1, fragmentMarker)
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		t.Errorf("%s: the ```go block at line %d is never closed", path, cur.line-1)
	}
	return blocks
}

// source turns a block into a Go file: a complete file is taken as it is;
// a run of declarations gets a package clause and the imports of the
// known packages it names. A //line directive maps positions back to the
// Markdown file.
func source(b block, pkg string) (string, error) {
	directive := fmt.Sprintf("//line %s:%d\n", b.file, b.line)
	if _, err := parser.ParseFile(token.NewFileSet(), "", b.code, parser.PackageClauseOnly); err == nil {
		return directive + b.code, nil // a complete file
	}
	f, err := parser.ParseFile(token.NewFileSet(), "block.go", "package "+pkg+"\n"+directive+b.code, 0)
	if err != nil {
		return "", fmt.Errorf("neither a Go file nor declarations (mark an excerpt %s): %v", fragmentMarker, err)
	}
	imported := map[string]bool{}
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		imported[p] = true
		if spec.Name != nil {
			imported[spec.Name.Name] = true
		} else {
			imported[p[strings.LastIndex(p, "/")+1:]] = true
		}
	}
	need := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Obj == nil && knownImports[x.Name] != "" && !imported[x.Name] {
				need[knownImports[x.Name]] = true
			}
		}
		return true
	})
	var src strings.Builder
	fmt.Fprintf(&src, "package %s\n\n", pkg)
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range need {
			if !yield(p) {
				return
			}
		}
	}) {
		fmt.Fprintf(&src, "import %q\n", p)
	}
	src.WriteString(directive + b.code)
	return src.String(), nil
}

// exportData builds (or finds in the build cache) the export data of paths
// and everything they import, keyed by import path.
func exportData(t *testing.T, paths []string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-e", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			files[path] = file
		}
	}
	return files
}

// TestGoBlocksCompile type-checks every ```go block of README.md and
// docs/*.md that is not marked as a fragment. A run of declarations is a
// package of its own; complete files with the same package clause in one
// document are the files of one package.
func TestGoBlocksCompile(t *testing.T) {
	type unit struct {
		name   string // what an error message calls it
		blocks []block
		files  []*ast.File
	}
	var (
		units   []*unit
		byPkg   = map[string]*unit{} // document + package name: its unit
		skipped []string
		paths   = map[string]bool{}
		fset    = token.NewFileSet()
		perDoc  = map[string][2]int{} // compiled, skipped
		docs    = documents(t)
	)
	compiled := 0
	for _, doc := range docs {
		for i, b := range extract(t, doc) {
			counts := perDoc[doc]
			if b.fragment {
				skipped = append(skipped, b.String())
				counts[1]++
				perDoc[doc] = counts
				continue
			}
			counts[0]++
			perDoc[doc] = counts
			compiled++
			src, err := source(b, fmt.Sprintf("block%d", i+1))
			if err != nil {
				t.Errorf("%s: %v", b, err)
				continue
			}
			f, err := parser.ParseFile(fset, fmt.Sprintf("block%d.go", i+1), src, parser.ParseComments) // positions: the //line directive
			if err != nil {
				t.Errorf("%s: %v", b, err)
				continue
			}
			for _, spec := range f.Imports {
				p, _ := strconv.Unquote(spec.Path.Value)
				paths[p] = true
			}
			u := &unit{name: b.String()}
			if complete := !strings.HasPrefix(f.Name.Name, "block"); complete {
				key := doc + " package " + f.Name.Name
				if byPkg[key] == nil {
					byPkg[key] = u
					units = append(units, u)
				}
				u = byPkg[key]
			} else {
				units = append(units, u)
			}
			u.blocks, u.files = append(u.blocks, b), append(u.files, f)
		}
	}
	if compiled == 0 {
		t.Fatal("no Go blocks found")
	}
	exports := exportData(t, slices.Sorted(maps.Keys(paths)))
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q (is it a package of this module or the standard library?)", path)
		}
		return os.Open(file)
	})
	for i, u := range units {
		var errs []string
		conf := types.Config{Importer: imp, Error: func(err error) { errs = append(errs, err.Error()) }}
		_, _ = conf.Check(fmt.Sprintf("docs.example/unit%d", i+1), fset, u.files, nil)
		if len(errs) > 0 {
			var where []string
			for _, b := range u.blocks {
				where = append(where, b.String())
			}
			t.Errorf("Go blocks %s do not compile:\n\t%s", strings.Join(where, ", "), strings.Join(errs, "\n\t"))
		}
	}
	for _, doc := range docs {
		if c := perDoc[doc]; c[0]+c[1] > 0 {
			t.Logf("%s: %d Go blocks compiled, %d fragments skipped", doc, c[0], c[1])
		}
	}
	t.Logf("in all: %d Go blocks compiled (as %d packages), %d fragments skipped %v", compiled, len(units), len(skipped), skipped)
}

// TestReadmeHelloIsTheExample checks that the README shows the hello world
// exactly as examples/hello/main.go has it, from its package clause on, so
// the code a newcomer copies is the code the example's tests run.
func TestReadmeHelloIsTheExample(t *testing.T) {
	main := read(t, "examples/hello/main.go")
	i := strings.Index(main, "\npackage main\n")
	if i < 0 {
		t.Fatal("examples/hello/main.go has no package clause")
	}
	want := main[i+1:]
	for _, b := range extract(t, "README.md") {
		if b.code == want {
			return
		}
	}
	t.Fatal("no Go block of README.md is examples/hello/main.go from its package clause on; copy it again")
}

// link matches a Markdown link or image target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinksResolve checks every relative link of README.md and
// docs/*.md names a file or directory of the repository, and that the
// README links every page of the guided tour.
func TestRelativeLinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		for _, m := range link.FindAllStringSubmatch(read(t, doc), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			path := filepath.Join("..", filepath.Dir(doc), filepath.FromSlash(target))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %q, which does not exist", doc, m[1])
			}
		}
	}
	readme := read(t, "README.md")
	for _, g := range guides {
		if !strings.Contains(readme, "]("+g+")") {
			t.Errorf("README.md does not link %s", g)
		}
	}
}
