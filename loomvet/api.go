package loomvet

import (
	"go/ast"
	"go/constant"
	"go/types"

	"golang.org/x/tools/go/types/typeutil"
)

// The packages whose objects loomvet recognizes, by import path.
const (
	loomPath   = "github.com/loom-kernel/loom"
	effectPath = loomPath + "/effect"
)

// loomName names fn as loomvet's tables do when it is a function or method
// of package loom: "NewFlow", "Context.Run", "Step.Iter" (the receiver's
// type name, without its pointer or type arguments). It is "" for anything
// else, nil included.
func loomName(fn *types.Func) string {
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != loomPath {
		return ""
	}
	fn = fn.Origin()
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Name()
	}
	if named := namedOf(recv.Type()); named != nil {
		return named.Obj().Name() + "." + fn.Name()
	}
	return ""
}

// calleeFunc is the function or method call invokes, or nil (a call of a
// function value, a conversion, a builtin).
func calleeFunc(info *types.Info, call *ast.CallExpr) *types.Func {
	fn, _ := typeutil.Callee(info, call).(*types.Func)
	return fn
}

// namedOf is the named type of t or of what t points to, or nil.
func namedOf(t types.Type) *types.Named {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	named, _ := types.Unalias(t).(*types.Named)
	return named
}

// isNamed reports whether t, or what it points to, is the type path.name.
func isNamed(t types.Type, path, name string) bool {
	named := namedOf(t)
	return named != nil && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == path && named.Obj().Name() == name
}

// effectArgs are the loom functions that run one of their arguments as an
// effect (live once, then recorded, and never again on replay), by the
// argument's index. The argument is not flow code.
var effectArgs = map[string]int{
	"NewStep":        1, // the step's function
	"Simulation":     0, // what the step does in simulate mode
	"Decide":         2, // the decider: its choice is recorded
	"Context.Run":    1,
	"Context.Decide": 1,
}

// taskEffectFields are the fields of loom.Task that hold an effect.
var taskEffectFields = []string{"Invoke", "Simulate"}

// isEffectSignature reports whether a function of type sig is, by the
// kernel's convention, an effect: it takes a context.Context or an
// *effect.Context, which flow code never does (flow code takes a
// *loom.Context). Such a function literal is not flow code: a step, a tool
// or a registered effect that runs live and is recorded.
func isEffectSignature(sig *types.Signature) bool {
	params := sig.Params()
	for i := range params.Len() {
		t := params.At(i).Type()
		if isNamed(t, "context", "Context") && types.IsInterface(t) {
			return true
		}
		if _, ptr := types.Unalias(t).(*types.Pointer); ptr && isNamed(t, effectPath, "Context") {
			return true
		}
	}
	return false
}

// isConstant reports whether e is a constant expression.
func isConstant(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	return ok && tv.Value != nil
}

// constantString is the value of e when it is a constant string.
func constantString(info *types.Info, e ast.Expr) (string, bool) {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// taskLiteral is the loom.Task composite literal e is (or takes the
// address of), or nil.
func taskLiteral(info *types.Info, e ast.Expr) *ast.CompositeLit {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = ast.Unparen(u.X)
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok || !isNamed(info.TypeOf(lit), loomPath, "Task") {
		return nil
	}
	return lit
}

// field is the value of the field name in a keyed composite literal, or
// nil.
func field(lit *ast.CompositeLit, name string) ast.Expr {
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok && key.Name == name {
				return kv.Value
			}
		}
	}
	return nil
}
