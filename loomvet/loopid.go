package loomvet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
)

// constantIDArgs are the loom calls that name what they record by an
// argument, by its index, with what repeating the name in a run does.
var constantIDArgs = map[string]struct {
	arg    int
	repeat string
}{
	"Context.Run":    {0, "later iterations are served the first one's outcome (or refused with *StepReusedError)"},
	"Context.Decide": {0, "deciding an id again in a run fails with *StepReusedError"},
	"Decide":         {1, "deciding an id again in a run fails with *StepReusedError"},
	"SpawnChild":     {2, "spawning a name again returns the first child"},
}

// checkLoopID reports, in a loop, a step run under an id that does not
// vary from one iteration to the next: loom.Run of a step that is not
// built in the loop (by Iter, Retry or NewStep), and ctx.Run, ctx.Decide,
// loom.Decide, loom.SpawnChild or ctx.Execute of a Task literal under a
// constant id. A closure made in a loop counts as in it: each branch or
// call of it runs once per iteration.
func (w *walker) checkLoopID(call *ast.CallExpr) {
	if len(w.loops) == 0 {
		return
	}
	name := loomName(calleeFunc(w.info, call))
	callee := types.ExprString(call.Fun)
	switch name {
	case "Run":
		if len(call.Args) == 3 && !w.varies(call.Args[1], 0) {
			step := types.ExprString(call.Args[1])
			w.report(call.Pos(), catLoopID, fmt.Sprintf("%s in a loop runs step %s under the same id on every iteration: later iterations are served the first one's outcome (or refused with *StepReusedError): use %s.Iter(i)", callee, step, step))
		}
	case "Context.Execute":
		if len(call.Args) == 0 {
			return
		}
		if lit := taskLiteral(w.info, call.Args[0]); lit != nil {
			if id := field(lit, "ID"); id != nil && isConstant(w.info, id) {
				w.report(call.Pos(), catLoopID, fmt.Sprintf("%s in a loop runs a Task under the constant id %s on every iteration: later iterations are served the first one's outcome (or refused with *StepReusedError): use a loop-varying id", callee, types.ExprString(id)))
			}
		}
	default:
		c, ok := constantIDArgs[name]
		if ok && c.arg < len(call.Args) && isConstant(w.info, call.Args[c.arg]) {
			w.report(call.Pos(), catLoopID, fmt.Sprintf("%s in a loop under the constant id %s: %s: use a loop-varying id", callee, types.ExprString(call.Args[c.arg]), c.repeat))
		}
	}
}

// varies reports whether step, run in the innermost loop, may have another
// id on each iteration. It is false for a step built outside the loop (a
// package-level step, a parameter, a variable last assigned before the
// loop) and for loom.NewStep, Iter and Retry given a constant; true for
// them given anything else, a range variable, an element of a slice or
// map, any other call, and whatever it cannot follow.
func (w *walker) varies(step ast.Expr, depth int) bool {
	if depth > maxResolveDepth {
		return true
	}
	loop := w.loops[len(w.loops)-1]
	inLoop := func(p token.Pos) bool { return loop.Pos() <= p && p < loop.End() }
	switch x := ast.Unparen(step).(type) {
	case *ast.CallExpr:
		switch loomName(calleeFunc(w.info, x)) {
		case "Step.Iter", "Step.Retry":
			return len(x.Args) == 0 || !isConstant(w.info, x.Args[0])
		case "NewStep":
			return len(x.Args) == 0 || !isConstant(w.info, x.Args[0])
		}
		return true
	case *ast.Ident:
		v, ok := w.info.Uses[x].(*types.Var)
		if !ok {
			return true
		}
		assignedInLoop := false
		for _, val := range w.idx.assigns[v] {
			if inLoop(val.Pos()) {
				assignedInLoop = true
				if w.varies(val, depth+1) {
					return true
				}
			}
		}
		if assignedInLoop {
			return false // every value it takes in the loop has one id
		}
		return inLoop(v.Pos()) // a range variable, or a parameter of a closure made in the loop
	case *ast.SelectorExpr:
		if s := w.info.Selections[x]; s != nil {
			return s.Kind() != types.FieldVal || w.varies(x.X, depth+1)
		}
		_, isVar := w.info.Uses[x.Sel].(*types.Var)
		return !isVar // a package-level step of another package
	}
	return true
}
