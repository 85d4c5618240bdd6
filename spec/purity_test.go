package spec

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The pure core (spec §1 P2, DESIGN P1/P2, STYLE 2): folding a log must read
// nothing but the log, and the rules that decide what may be appended
// (the ingress gate, the divergence detector) nothing but their arguments.
// The guarantee these tests give is about OUR code: no package of the
// module that a pure package is built from imports an ambient-input
// package, calls the wall clock, or ranges over a map without saying why
// its order cannot leak. What the standard library does inside (fmt imports
// os, time imports syscall) is its own business and is not examined: a std
// package is a leaf here, and so is a reviewed third-party package.

// purePackages are the pure-core directories. A required one must exist; an
// optional one is checked as soon as its directory holds a non-test Go
// file. forbid lists imports refused to that package itself (not to its
// dependencies), beyond forbiddenImports.
var purePackages = []struct {
	dir      string
	required bool
	forbid   []string
}{
	{"event", true, nil},
	{"fold", false, nil},
	// The gate and the detector take now as an argument and read no stream.
	{"internal/admission", true, []string{"time", "io/..."}},
	{"internal/divergence", true, []string{"time", "io/..."}},
}

// reviewedImports are the third-party packages a module package of the
// pure closure may import, each with the review that admitted it. Like a
// std package, a reviewed one is a leaf here.
var reviewedImports = map[string]string{
	"github.com/santhosh-tekuri/jsonschema/v6": "internal/schema (the resume schemas the gate applies) compiles with a loader that refuses every external $ref, so validating a payload reads no file and no network",
	"golang.org/x/text/language":               "internal/schema names the English locale of the validator's messages; a constant table",
	"golang.org/x/text/message":                "internal/schema prints the validator's messages in that locale; no catalog is loaded",

	"github.com/go-json-experiment/json":          "event.UnmarshalExact decodes recorded payloads with exact member names; it imports only std (reflect, sync pools; no clock, os or unsafe)",
	"github.com/go-json-experiment/json/jsontext": "event.UnmarshalExact reads raw values and checks repeated names with it; it imports only std, as above",
}

// forbiddenImports are ambient input (files, environment, network, process,
// clock-free randomness, seeds) or escape hatches (unsafe, runtime). A path
// ending in "/..." forbids the path and everything under it.
var forbiddenImports = []string{
	"os/...", "net/...", "syscall", "unsafe", "runtime/...", "plugin",
	"math/rand/...", "crypto/rand", "hash/maphash", "database/sql/...", "flag",
}

// forbiddenTimeFuncs read the wall clock or wait on it. Methods of the same
// name (time.Time.After) are pure and allowed.
var forbiddenTimeFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Tick": true, "After": true, "AfterFunc": true,
	"NewTimer": true, "NewTicker": true, "Sleep": true,
}

// orderMarkers excuse a range over a map; each must be followed by the
// reason order cannot leak, on the line of the for or the line before.
var orderMarkers = []string{"//loom:sorted", "//loom:order-independent"}

func forbiddenImport(path string) bool { return matchesImport(path, forbiddenImports) }

// matchesImport reports whether path is one of patterns, where a pattern
// ending in "/..." also matches everything under it.
func matchesImport(path string, patterns []string) bool {
	for _, f := range patterns {
		if root, ok := strings.CutSuffix(f, "/..."); ok {
			if path == root || strings.HasPrefix(path, root+"/") {
				return true
			}
		} else if path == f {
			return true
		}
	}
	return false
}

// importViolations checks the direct imports of every module package in
// pkgs (a `go list -deps` closure): a forbidden package, one forbidden to
// that package by own (import path -> patterns), or a dependency that is
// neither the standard library, the module nor a reviewed import, is
// reported.
func importViolations(pkgs []goPackage, own map[string][]string) []string {
	std := map[string]bool{}
	for _, p := range pkgs {
		std[p.ImportPath] = p.Standard
	}
	var out []string
	for _, p := range pkgs {
		if !inModule(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			switch {
			case forbiddenImport(imp):
				out = append(out, p.ImportPath+" imports "+imp+" (ambient input or an escape hatch)")
			case matchesImport(imp, own[p.ImportPath]):
				out = append(out, p.ImportPath+" imports "+imp+" (forbidden to this package: take the value as an argument)")
			case !std[imp] && !inModule(imp) && imp != "C" && reviewedImports[imp] == "":
				out = append(out, p.ImportPath+" imports "+imp+" (neither the standard library nor the module: review it, then allow it in reviewedImports)")
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkPureSource type-checks one package's files and reports every call or
// reference to a forbidden time function and every unexcused range over a
// map (or over maps.Keys/Values/All, which iterate in map order).
func checkPureSource(fset *token.FileSet, path string, files []*ast.File, imp types.Importer) ([]string, error) {
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(path, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-checking %s: %w", path, err)
	}
	var out []string
	report := func(pos token.Pos, msg string) {
		out = append(out, fset.Position(pos).String()+": "+msg)
	}
	for _, f := range files {
		excused := markedLines(fset, f)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if fn, ok := info.Uses[n.Sel].(*types.Func); ok && isPkgFunc(fn, "time") && forbiddenTimeFuncs[fn.Name()] {
					report(n.Pos(), "time."+fn.Name()+" reads the wall clock; use the recorded timestamp")
				}
			case *ast.RangeStmt:
				if n.Key == nil && n.Value == nil {
					return true // counts iterations only; order cannot show
				}
				if !rangesInMapOrder(info, n.X) {
					return true
				}
				line := fset.Position(n.For).Line
				if !excused[line] && !excused[line-1] {
					report(n.For, "range over a map without a //loom:sorted or //loom:order-independent comment saying why its order cannot leak")
				}
			}
			return true
		})
	}
	return out, nil
}

func isPkgFunc(fn *types.Func, pkg string) bool {
	sig, _ := fn.Type().(*types.Signature)
	return fn.Pkg() != nil && fn.Pkg().Path() == pkg && sig != nil && sig.Recv() == nil
}

func rangesInMapOrder(info *types.Info, x ast.Expr) bool {
	if t := info.TypeOf(x); t != nil {
		if _, ok := t.Underlying().(*types.Map); ok {
			return true
		}
	}
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return false
	}
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.Ident:
		id = fun
	default:
		return false
	}
	fn, ok := info.Uses[id].(*types.Func)
	return ok && isPkgFunc(fn, "maps") && (fn.Name() == "Keys" || fn.Name() == "Values" || fn.Name() == "All")
}

// markedLines returns the lines holding an order marker with a reason.
func markedLines(fset *token.FileSet, f *ast.File) map[int]bool {
	lines := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			for _, m := range orderMarkers {
				if reason, ok := strings.CutPrefix(c.Text, m); ok && strings.HasPrefix(reason, " ") && strings.TrimSpace(reason) != "" {
					lines[fset.Position(c.Slash).Line] = true
				}
			}
		}
	}
	return lines
}

// pureImportPaths returns the import paths of the pure packages present,
// failing when a required one is missing.
func pureImportPaths(t *testing.T) []string {
	t.Helper()
	root := moduleRoot(t)
	var paths []string
	for _, p := range purePackages {
		files, _ := filepath.Glob(filepath.Join(root, p.dir, "*.go"))
		has := false
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				has = true
			}
		}
		switch {
		case has:
			paths = append(paths, modulePath+"/"+p.dir)
		case p.required:
			t.Fatalf("pure package %s has no Go files: the guard must not pass by checking nothing", p.dir)
		default:
			t.Logf("%s has no Go files yet; it is checked once it has", p.dir)
		}
	}
	return paths
}

// ownForbids maps each pure package's import path to the imports refused
// to it alone (purePackages' forbid).
func ownForbids() map[string][]string {
	own := map[string][]string{}
	for _, p := range purePackages {
		if len(p.forbid) > 0 {
			own[modulePath+"/"+p.dir] = p.forbid
		}
	}
	return own
}

// TestPureCoreForbiddenImports: no module package that a pure package is
// built from imports ambient input (os, net, randomness, database/sql…),
// unsafe or runtime, or an unreviewed third-party package, and no pure
// package imports what its own forbid list refuses it (the ingress gate and
// the divergence detector: no time, no io).
func TestPureCoreForbiddenImports(t *testing.T) {
	paths := pureImportPaths(t)
	pkgs := goList(t, "ImportPath,Imports,Standard,Error", append([]string{"-deps"}, paths...)...)
	listed := map[string]bool{}
	for _, p := range pkgs {
		listed[p.ImportPath] = true
		if p.Error != nil && inModule(p.ImportPath) {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
	}
	for _, p := range paths {
		if !listed[p] {
			t.Fatalf("go list -deps did not list %s", p)
		}
	}
	for _, v := range importViolations(pkgs, ownForbids()) {
		t.Error(v)
	}
}

// TestPureCoreSource: the non-test source of the pure packages never reads
// the wall clock and never ranges over a map without saying why order
// cannot leak (Go randomizes map order; DESIGN "Map order").
func TestPureCoreSource(t *testing.T) {
	paths := pureImportPaths(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	for _, p := range goList(t, "ImportPath,Dir,GoFiles", paths...) {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		problems, err := checkPureSource(fset, p.ImportPath, files, imp)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range problems {
			t.Error(v)
		}
	}
}

func checkSynthetic(t *testing.T, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "synthetic.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkPureSource(fset, "example.com/synthetic", []*ast.File{f}, importer.ForCompiler(fset, "source", nil))
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// TestPureSourceCheckCatchesClockReads proves the clock check can fail, even
// through an import alias or a function value, and spares time.Time methods.
func TestPureSourceCheckCatchesClockReads(t *testing.T) {
	problems := checkSynthetic(t, `package synthetic

import (
	"time"
	clock "time"
)

var now = time.Now

func f(t0 time.Time, d time.Duration) bool {
	_ = clock.Since(t0)
	<-time.After(d)
	time.Sleep(d)
	_ = time.NewTimer(d)
	_ = time.Tick(d)
	_ = time.Until(t0)
	_ = t0.Add(d).After(t0) // a method: pure
	_ = time.Unix(0, 0)     // pure
	return t0.Before(now())
}
`)
	want := []string{
		"synthetic.go:8:11: time.Now",
		"synthetic.go:11:6: time.Since",
		"synthetic.go:12:4: time.After",
		"synthetic.go:13:2: time.Sleep",
		"synthetic.go:14:6: time.NewTimer",
		"synthetic.go:15:6: time.Tick",
		"synthetic.go:16:6: time.Until",
	}
	assertProblems(t, problems, want)
}

// TestPureSourceCheckCatchesMapRanges proves the map-order check can fail,
// and that a marker with a reason, on the line or the line before, excuses.
func TestPureSourceCheckCatchesMapRanges(t *testing.T) {
	problems := checkSynthetic(t, `package synthetic

import (
	"maps"
	"slices"
)

type set map[string]bool

func f(m map[string]int, s set) (out []string) {
	for k := range m {
		out = append(out, k)
	}
	for k, v := range s {
		_, _ = k, v
	}
	for k := range maps.Keys(m) {
		out = append(out, k)
	}
	for k := range m { //loom:sorted
		out = append(out, k)
	}
	//loom:sorted sorted right after the loop
	for k := range m {
		out = append(out, k)
	}
	for k := range m { //loom:order-independent copying into a map
		s[k] = true
	}
	for range m { // counting only
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
`)
	want := []string{
		"synthetic.go:11:2: range over a map",
		"synthetic.go:14:2: range over a map",
		"synthetic.go:17:2: range over a map",
		"synthetic.go:20:2: range over a map", // a marker without a reason
	}
	assertProblems(t, problems, want)
}

// TestPureImportCheckCatchesAmbientImports proves the import check can fail
// on a synthetic closure: module packages are judged by their direct
// imports, std packages and reviewed third-party packages are leaves, and a
// package's own forbid list binds that package only.
func TestPureImportCheckCatchesAmbientImports(t *testing.T) {
	const reviewed = "github.com/santhosh-tekuri/jsonschema/v6"
	pkgs := []goPackage{
		{ImportPath: "fmt", Standard: true, Imports: []string{"os", "reflect"}},
		{ImportPath: "os", Standard: true, Imports: []string{"syscall"}},
		{ImportPath: "io", Standard: true},
		{ImportPath: "sort", Standard: true},
		{ImportPath: "strings", Standard: true},
		{ImportPath: "io/fs", Standard: true, Imports: []string{"time"}},
		{ImportPath: "net/http", Standard: true},
		{ImportPath: "math/rand/v2", Standard: true},
		{ImportPath: "time", Standard: true, Imports: []string{"syscall"}},
		{ImportPath: "example.org/lib", Imports: []string{"os"}},
		{ImportPath: reviewed, Imports: []string{"os", "example.org/lib"}},
		{ImportPath: modulePath + "/event", Imports: []string{"fmt", "time", "io"}},
		{ImportPath: modulePath + "/internal/clock", Imports: []string{"os", "net/http"}},
		{ImportPath: modulePath + "/internal/schema", Imports: []string{reviewed, "time"}},
		{ImportPath: modulePath + "/internal/admission", Imports: []string{modulePath + "/internal/schema", "time", "io/fs", "strings"}},
		{ImportPath: modulePath + "/internal/divergence", Imports: []string{"io", "sort"}},
		{ImportPath: modulePath + "/fold", Imports: []string{modulePath + "/event", modulePath + "/internal/clock", "math/rand/v2", "example.org/lib"}},
	}
	own := map[string][]string{
		modulePath + "/internal/admission":  {"time", "io/..."},
		modulePath + "/internal/divergence": {"time", "io/..."},
	}
	want := []string{
		modulePath + "/fold imports example.org/lib (neither",
		modulePath + "/fold imports math/rand/v2 (ambient",
		modulePath + "/internal/admission imports io/fs (forbidden to this package",
		modulePath + "/internal/admission imports time (forbidden to this package",
		modulePath + "/internal/clock imports net/http (ambient",
		modulePath + "/internal/clock imports os (ambient",
		modulePath + "/internal/divergence imports io (forbidden to this package",
	}
	assertProblems(t, importViolations(pkgs, own), want)
	if reviewedImports[reviewed] == "" {
		t.Fatalf("the synthetic closure assumes %s is reviewed", reviewed)
	}
	for path, why := range reviewedImports { //loom:order-independent checks each entry on its own
		if strings.TrimSpace(why) == "" || inModule(path) {
			t.Errorf("reviewed import %q: a third-party path needs the review that admitted it", path)
		}
	}
	// The real configuration: the gate and the detector may import neither
	// time nor io.
	for _, dir := range []string{"internal/admission", "internal/divergence"} {
		for _, imp := range []string{"time", "io", "io/fs"} {
			if !matchesImport(imp, ownForbids()[modulePath+"/"+dir]) {
				t.Errorf("%s may import %s", dir, imp)
			}
		}
	}
	for _, p := range []string{"os", "os/exec", "net", "net/netip", "math/rand", "math/rand/v2", "crypto/rand",
		"database/sql", "database/sql/driver", "syscall", "unsafe", "runtime", "runtime/debug", "hash/maphash"} {
		if !forbiddenImport(p) {
			t.Errorf("%s is not forbidden", p)
		}
	}
	for _, p := range []string{"osx", "network", "time", "math", "crypto/sha256", "encoding/json", "sort", "runtimes"} {
		if forbiddenImport(p) {
			t.Errorf("%s is forbidden", p)
		}
	}
}

// assertProblems matches each problem to the prefix of the same index.
func assertProblems(t *testing.T, got, wantPrefixes []string) {
	t.Helper()
	ok := len(got) == len(wantPrefixes)
	for i := 0; ok && i < len(got); i++ {
		ok = strings.HasPrefix(got[i], wantPrefixes[i])
	}
	if !ok {
		t.Fatalf("problems:\n got %s\nwant prefixes %s", strings.Join(got, "\n     "), strings.Join(wantPrefixes, "\n     "))
	}
}
