package loomvet

import (
	"go/ast"
	"go/token"
)

// walker walks the body of one unit of flow code, descending into the
// closures in it (not into effects) and keeping the loops it is in.
type walker struct {
	*checker
	unit  unit
	loops []ast.Node // the enclosing for and range statements, innermost last
}

// walk checks n and what it contains. A nil n is nothing.
func (w *walker) walk(n ast.Node) {
	if n != nil {
		ast.Inspect(n, w.visit)
	}
}

// inLoop walks parts, the parts of loop that run on every iteration.
func (w *walker) inLoop(loop ast.Node, parts ...ast.Node) {
	w.loops = append(w.loops, loop)
	for _, p := range parts {
		w.walk(p)
	}
	w.loops = w.loops[:len(w.loops)-1]
}

func (w *walker) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.FuncLit:
		if w.idx.isEffect(n) {
			return false // a step's function, a tool, a decider: it runs live once and is recorded
		}
		w.walked[n] = true
	case *ast.ForStmt:
		w.walk(n.Init) // runs once
		w.inLoop(n, n.Cond, n.Post, n.Body)
		return false
	case *ast.RangeStmt:
		w.checkRange(n)
		w.walk(n.X) // evaluated once
		w.inLoop(n, n.Key, n.Value, n.Body)
		return false
	case *ast.SelectStmt:
		w.report(n.Select, catChannel, "select in flow code waits on channels the log does not record, so a replay may take another case: use ctx.Select with loom.OnMessage, loom.OnGate and loom.OnTimer, or loom.Receive for one inbox topic")
		for _, clause := range n.Body.List {
			for _, s := range clause.(*ast.CommClause).Body {
				w.walk(s)
			}
		}
		return false
	case *ast.GoStmt:
		w.report(n.Go, catGoroutine, "go statement in flow code: a goroutine of your own interleaves differently on every replay and must not call the Context: use ctx.Parallel or loom.Parallel, whose branches replay by step id")
	case *ast.SendStmt:
		w.report(n.Arrow, catChannel, "channel send in flow code: what another goroutine does with it is not in the log: use ctx.Parallel or loom.Parallel to fan out and collect, or the inbox (loom.Receive, ctx.Select) to wait for a message")
	case *ast.UnaryExpr:
		if n.Op == token.ARROW {
			w.report(n.OpPos, catChannel, "channel receive in flow code: when and what it receives is not in the log: use ctx.Parallel or loom.Parallel to fan out and collect, or the inbox (loom.Receive, ctx.Select) to wait for a message")
		}
	case *ast.Ident:
		w.checkUse(n)
	case *ast.AssignStmt:
		if n.Tok != token.DEFINE {
			for _, lhs := range n.Lhs {
				w.checkWrite(lhs)
			}
		}
	case *ast.IncDecStmt:
		w.checkWrite(n.X)
	case *ast.CallExpr:
		w.checkLoopID(n)
		w.callees(n)
	}
	return true
}

// report reports a finding in this unit; in a function flow code calls, it
// says which and from what flow.
func (w *walker) report(pos token.Pos, category, message string) {
	if w.unit.helper != "" {
		message += " (in " + w.unit.helper + ", reached from " + w.unit.flow + ")"
	}
	w.rep.report(pos, category, message)
}
