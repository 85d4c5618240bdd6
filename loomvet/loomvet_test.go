package loomvet_test

import (
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
	"golang.org/x/tools/go/packages"

	"github.com/loom-kernel/loom/loomvet"
)

// The cases are packages of testdata/src, loaded by analysistest in GOPATH
// mode (testdata has no go.mod): they import a stub of
// github.com/loom-kernel/loom under testdata/src, so the tests need no
// network and no build of the real module's dependencies;
// TestStubMatchesLoom keeps the stub true to the real package. A case
// file marks each finding loomvet must report with a "// want" comment
// holding a pattern of its message; every other line must be silent.

// cases are the case packages, each with the subtest that reports it.
var cases = []struct{ name, pkg string }{
	// time.Now, Since, Until and the wall-clock waits are reported;
	// loom.Now, ctx.Sleep and methods of time.Time are not.
	{"Rule1_Clock", "clock"},
	// math/rand, math/rand/v2 and crypto/rand draws are reported;
	// loom.Random, a fixed-seed generator and deciders are not.
	{"Rule2_Random", "random"},
	// Calls into os, os/exec, net and net/http are reported, but for the
	// pure helpers; I/O in steps is not.
	{"Rule3_IO", "ioflow"},
	// go, select, channel sends, receives and ranges are reported, in
	// Parallel branches too; ctx.Parallel, loom.Parallel, ctx.Select and
	// loom.Receive are not.
	{"Rule4_Concurrency", "concurrency"},
	// A range over a map (or maps.Keys, maps.Values) is reported unless it
	// counts only, ranges in sorted order or is vetted.
	{"Rule5_MapOrder", "maporder"},
	// Writes to package-level variables (of this package or another, their
	// fields and elements) are reported; local state and a step's own
	// state are not.
	{"Rule6_Globals", "globals"},
	// A step, decision, child or Task in a loop under an id that does not
	// vary is reported; Iter, Retry, steps built in the loop under a
	// varying id and steps taken from a slice are not.
	{"Rule7_LoopIDs", "loopid"},
	// Nothing in a step's function, a simulation, ctx.Run's function, a
	// decider, a Task's Invoke or Simulate, or a function literal with an
	// effect's signature is reported.
	{"EffectsAreNotFlowCode", "effects"},
	// The functions, methods and function variables a flow body calls are
	// checked, transitively and once, and named in the finding; a function
	// only a step calls is not.
	{"HelpersAreFlowCode", "helpers"},
	// A body is found through a renamed import, an explicit instantiation,
	// a method value, a variable, a Flow literal and an assignment to
	// Body; a NewFlow of another package is not loom's.
	{"FlowBodiesFoundByType", "discovery"},
	// //loomvet:ok with a reason silences its line and the next; one
	// without a reason is reported and silences nothing.
	{"Annotations", "annotations"},
}

// canFail is a case package whose expectations are wrong on purpose: one
// finding has no "// want", one "// want" has no finding.
const canFail = "canfail"

// recorder is an analysistest.Testing that keeps what it is told.
type recorder struct {
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestCases runs loomvet over every case package in one analysistest run
// (loading their dependencies, net/http among them, is most of the time)
// and reports each package's mismatches in its own subtest.
func TestCases(t *testing.T) {
	dir := analysistest.TestData()
	src, err := filepath.Abs(filepath.Join(dir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := []string{canFail}
	byPkg := map[string][]string{}
	for _, c := range cases {
		pkgs = append(pkgs, c.pkg)
		byPkg[c.pkg] = nil
	}
	rec := &recorder{}
	analysistest.Run(rec, dir, loomvet.Analyzer, pkgs...)
	for _, e := range rec.errs {
		e = strings.ReplaceAll(e, src+string(filepath.Separator), "")
		pkg, _, _ := strings.Cut(e, "/")
		if _, ok := byPkg[pkg]; ok || pkg == canFail {
			byPkg[pkg] = append(byPkg[pkg], e)
		} else {
			t.Error(e) // loading or type-checking failed
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range byPkg[c.pkg] {
				t.Error(e)
			}
		})
	}
	// The harness can fail: the wrong expectations of canfail are caught.
	t.Run("HarnessCanFail", func(t *testing.T) {
		got := byPkg[canFail]
		if len(got) != 2 || !strings.Contains(got[0]+got[1], "unexpected diagnostic") || !strings.Contains(got[0]+got[1], "no diagnostic was reported") {
			t.Errorf("canfail: want one unexpected diagnostic and one missing, got %d errors: %q", len(got), got)
		}
	})
}

func TestAnalyzerIsValid(t *testing.T) {
	if err := analysis.Validate([]*analysis.Analyzer{loomvet.Analyzer}); err != nil {
		t.Fatal(err)
	}
	if loomvet.Analyzer.Name != "loomvet" {
		t.Fatalf("Name = %q, want loomvet", loomvet.Analyzer.Name)
	}
}

// stubbed are the packages testdata/src stubs.
var stubbed = []string{"github.com/loom-kernel/loom", "github.com/loom-kernel/loom/effect"}

// TestStubMatchesLoom checks every name the stub declares against the real
// package: the same kind, signature, type parameters, methods and field
// types (the stub may leave fields and methods out, never change them).
// A stub that drifted would let the tests pass on an API loom no longer
// has.
func TestStubMatchesLoom(t *testing.T) {
	actual := load(t, "..", nil)
	gopath, err := filepath.Abs(analysistest.TestData())
	if err != nil {
		t.Fatal(err)
	}
	stub := load(t, gopath, []string{"GOPATH=" + gopath, "GO111MODULE=off", "GOWORK=off"})
	for _, path := range stubbed {
		scope := stub[path].Scope()
		for _, name := range scope.Names() {
			s, r := scope.Lookup(name), actual[path].Scope().Lookup(name)
			if r == nil {
				t.Errorf("the stub declares %s.%s, which the real package does not", path, name)
				continue
			}
			for _, diff := range differences(s, r) {
				t.Errorf("%s.%s: %s", path, name, diff)
			}
		}
	}
}

// load type-checks the stubbed packages as seen from dir (with env added
// to the environment), by import path.
func load(t *testing.T, dir string, env []string) map[string]*types.Package {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir}
	if env != nil {
		cfg.Env = append(os.Environ(), env...)
	}
	pkgs, err := packages.Load(cfg, stubbed...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*types.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("loading %s from %s: %v", p.PkgPath, dir, e)
		}
		out[p.PkgPath] = p.Types
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// byName prints types with package names, so a stub's and the real
// package's types compare equal.
func byName(p *types.Package) string { return p.Name() }

// differences lists how the stub's object s differs from the real r.
func differences(s, r types.Object) []string {
	var out []string
	if str(s.Type()) != str(r.Type()) {
		out = append(out, "type "+str(s.Type())+", the real one "+str(r.Type()))
	}
	st, ok := s.(*types.TypeName)
	if !ok {
		return out
	}
	rt, ok := r.(*types.TypeName)
	if !ok {
		return append(out, "a type in the stub, not in the real package")
	}
	sn, rn := st.Type().(*types.Named), rt.Type().(*types.Named)
	if sn == nil || rn == nil {
		return out
	}
	if a, b := typeParams(sn), typeParams(rn); a != b {
		out = append(out, "type parameters "+a+", the real ones "+b)
	}
	for i := range sn.NumMethods() {
		m := sn.Method(i)
		obj, _, _ := types.LookupFieldOrMethod(rn, true, rn.Obj().Pkg(), m.Name())
		rm, ok := obj.(*types.Func)
		switch {
		case !ok:
			out = append(out, "method "+m.Name()+" is not the real package's")
		case str(m.Type()) != str(rm.Type()):
			out = append(out, "method "+m.Name()+" "+str(m.Type())+", the real one "+str(rm.Type()))
		}
	}
	ss, sok := sn.Underlying().(*types.Struct)
	rs, rok := rn.Underlying().(*types.Struct)
	switch {
	case sok && rok:
		for i := range ss.NumFields() {
			f := ss.Field(i)
			if !f.Exported() {
				continue // the stub's own storage
			}
			if rf := fieldNamed(rs, f.Name()); rf == nil {
				out = append(out, "field "+f.Name()+" is not the real package's")
			} else if str(f.Type()) != str(rf.Type()) {
				out = append(out, "field "+f.Name()+" "+str(f.Type())+", the real one "+str(rf.Type()))
			}
		}
	case sok != rok || str(sn.Underlying()) != str(rn.Underlying()):
		out = append(out, "underlying type "+str(sn.Underlying())+", the real one "+str(rn.Underlying()))
	}
	return out
}

func str(t types.Type) string { return types.TypeString(t, byName) }

func typeParams(n *types.Named) string {
	var ps []string
	for i := range n.TypeParams().Len() {
		p := n.TypeParams().At(i)
		ps = append(ps, p.Obj().Name()+" "+str(p.Constraint()))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

func fieldNamed(s *types.Struct, name string) *types.Var {
	for i := range s.NumFields() {
		if s.Field(i).Name() == name {
			return s.Field(i)
		}
	}
	return nil
}
