package loomvet

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// Analyzer reports flow code that would not replay deterministically: a
// clock read, a random draw, I/O, a goroutine or channel, a range over a
// map, a write to a package-level variable, or a step run in a loop under
// an id that does not vary. It checks the bodies given to loom.NewFlow (or
// a loom.Flow's Body), the closures in them, and the functions of the same
// package they call; never the function a step runs. A comment
// "//loomvet:ok <reason>" on the reported line or the line above silences
// a finding; one without a reason is reported itself. It has no flags and
// exports no facts.
var Analyzer = &analysis.Analyzer{
	Name: "loomvet",
	Doc: `report flow code that would not replay deterministically

A Loom flow body (the function given to loom.NewFlow, or a loom.Flow's
Body) runs again from the top over its log on every resume, recovery and
replay, and must take the same path each time. loomvet checks each flow
body, the closures in it and the functions of its package it calls, and
reports:

  clock      time.Now, Since, Until, Sleep, After, Tick, AfterFunc,
             NewTimer, NewTicker: use loom.Now(ctx), ctx.Sleep,
             ctx.SleepUntil or loom.OnTimer in ctx.Select
  random     math/rand, math/rand/v2, crypto/rand: use loom.Random(ctx)
  io         os, os/exec, net, net/http, database/sql...: do I/O in a
             step (loom.Run, ctx.Run)
  goroutine  a go statement: use ctx.Parallel or loom.Parallel
  channel    select, send, receive, range over a channel: use
             ctx.Parallel, or the inbox (loom.Receive, ctx.Select)
  map-order  a range over a map: range over slices.Sorted(maps.Keys(m))
  global     a write to a package-level variable
  loop-id    a step, decision or child in a loop under an id that does
             not vary: use step.Iter(i) or a loop-varying id

The function a step runs is an effect, not flow code, and is not checked:
the function given to loom.NewStep, loom.Simulation, ctx.Run, a decider
given to Decide, a Task's Invoke or Simulate, and any function literal
that takes a context.Context or an *effect.Context.

A comment "//loomvet:ok <reason>" on the reported line or the line above
silences a finding; an annotation without a reason is reported and
silences nothing. On a range over a map, the kernel's own
"//loom:sorted <reason>" and "//loom:order-independent <reason>" work too.`,
	Run: run,
}

// Diagnostic categories: one per check, named in docs/loomvet.md.
const (
	catClock      = "clock"
	catRandom     = "random"
	catIO         = "io"
	catGoroutine  = "goroutine"
	catChannel    = "channel"
	catMapOrder   = "map-order"
	catGlobal     = "global"
	catLoopID     = "loop-id"
	catAnnotation = "annotation"
)

// unit is one function whose body is flow code: a flow body, or a
// function of the package that flow code calls.
type unit struct {
	fn     ast.Node // *ast.FuncLit or *ast.FuncDecl
	helper string   // the function's name when flow code calls it; "" for a flow body
	flow   string   // the flow it is reached from, as a diagnostic names it
}

// checker checks the flow code of one package.
type checker struct {
	info   *types.Info
	idx    *index
	rep    *reporter
	queue  []unit
	walked map[ast.Node]bool // functions whose body was checked
}

func run(pass *analysis.Pass) (any, error) {
	c := &checker{info: pass.TypesInfo, idx: newIndex(pass), rep: newReporter(pass), walked: map[ast.Node]bool{}}
	c.queue = flowBodies(pass, c.idx)
	for len(c.queue) > 0 {
		u := c.queue[0]
		c.queue = c.queue[1:]
		if !c.walked[u.fn] {
			c.walked[u.fn] = true
			c.check(u)
		}
	}
	return nil, nil
}

// enqueue adds fn, called from flow code of from, to the functions to
// check.
func (c *checker) enqueue(fn ast.Node, name string, from unit) {
	if !c.walked[fn] {
		c.queue = append(c.queue, unit{fn: fn, helper: name, flow: from.flow})
	}
}

// flowBodies finds the package's flow bodies, in source order: the
// functions given to loom.NewFlow, set as a loom.Flow's Body in a
// composite literal, or assigned to a Flow's Body.
func flowBodies(pass *analysis.Pass, idx *index) []unit {
	var units []unit
	add := func(body, id ast.Expr, at ast.Node) {
		flow := fmt.Sprintf("the flow at %s:%d", filepath.Base(pass.Fset.Position(at.Pos()).Filename), pass.Fset.Position(at.Pos()).Line)
		if id != nil {
			if s, ok := constantString(pass.TypesInfo, id); ok {
				flow = fmt.Sprintf("flow %q", s)
			}
		}
		for _, fn := range idx.functions(body, 0) {
			units = append(units, unit{fn: fn, flow: flow})
		}
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if loomName(calleeFunc(pass.TypesInfo, n)) == "NewFlow" && len(n.Args) >= 2 {
					add(n.Args[1], n.Args[0], n)
				}
			case *ast.CompositeLit:
				if isNamed(pass.TypesInfo.TypeOf(n), loomPath, "Flow") {
					if body := field(n, "Body"); body != nil {
						add(body, field(n, "ID"), n)
					}
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, lhs := range n.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Body" {
							if s := pass.TypesInfo.Selections[sel]; s != nil && isNamed(s.Recv(), loomPath, "Flow") {
								add(n.Rhs[i], nil, n)
							}
						}
					}
				}
			}
			return true
		})
	}
	return units
}

// functions resolves e, an expression of function type, to the function
// literals and declarations of this package it may be: a literal, a
// function or method declared here, or a variable assigned them. It finds
// nothing for a function of another package or one a call returns.
func (idx *index) functions(e ast.Expr, depth int) []ast.Node {
	if depth > maxResolveDepth {
		return nil
	}
	e = ast.Unparen(e)
	switch x := e.(type) {
	case *ast.FuncLit:
		return []ast.Node{x}
	case *ast.IndexExpr: // an instantiation: body[T]
		return idx.functions(x.X, depth+1)
	case *ast.IndexListExpr:
		return idx.functions(x.X, depth+1)
	}
	var obj types.Object
	switch x := e.(type) {
	case *ast.Ident:
		obj = idx.info.Uses[x]
	case *ast.SelectorExpr:
		if s := idx.info.Selections[x]; s != nil {
			obj = s.Obj()
		} else {
			obj = idx.info.Uses[x.Sel]
		}
	}
	switch obj := obj.(type) {
	case *types.Func:
		if decl := idx.decls[obj.Origin()]; decl != nil && decl.Body != nil {
			return []ast.Node{decl}
		}
	case *types.Var:
		var out []ast.Node
		for _, v := range idx.assigns[obj] {
			out = append(out, idx.functions(v, depth+1)...)
		}
		return out
	}
	return nil
}

// maxResolveDepth bounds how many variables and instantiations functions
// and varies follow from an expression to its definition.
const maxResolveDepth = 8

// check checks the body of u as flow code.
func (c *checker) check(u unit) {
	w := &walker{checker: c, unit: u}
	switch fn := u.fn.(type) {
	case *ast.FuncLit:
		w.walk(fn.Body)
	case *ast.FuncDecl:
		w.walk(fn.Body)
	}
}

// callees enqueues the functions of this package call invokes: a function
// or method declared here (a static call), or the function literals the
// called variable is assigned.
func (w *walker) callees(call *ast.CallExpr) {
	switch callee := typeutil.Callee(w.info, call).(type) {
	case *types.Func:
		if decl := w.idx.decls[callee.Origin()]; decl != nil && decl.Body != nil {
			w.enqueue(decl, declName(decl), w.unit)
		}
	case *types.Var:
		for _, v := range w.idx.assigns[callee] {
			if lit, ok := ast.Unparen(v).(*ast.FuncLit); ok && !w.idx.isEffect(lit) {
				w.enqueue(lit, callee.Name(), w.unit)
			}
		}
	}
}

// declName is how a diagnostic names a declared function: "fetch",
// "planner.config".
func declName(decl *ast.FuncDecl) string {
	if decl.Recv == nil || len(decl.Recv.List) == 0 {
		return decl.Name.Name
	}
	t := decl.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + decl.Name.Name
		}
		return decl.Name.Name
	}
}
