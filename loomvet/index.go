package loomvet

import (
	"go/ast"
	"go/types"
	"slices"

	"golang.org/x/tools/go/analysis"
)

// index is what loomvet learns of a package before it checks flow code:
// where its functions are declared, what each variable is assigned, and
// which function literals are effects.
type index struct {
	info *types.Info
	// decls are the package's function and method declarations.
	decls map[*types.Func]*ast.FuncDecl
	// assigns are the values assigned to each variable of the package,
	// its definition included (see assigned).
	assigns map[*types.Var][]ast.Expr
	// effects are the function literals loom runs as effects: given to
	// an effect argument (effectArgs) or a Task's Invoke or Simulate,
	// directly or through a variable.
	effects map[*ast.FuncLit]bool
}

func newIndex(pass *analysis.Pass) *index {
	idx := &index{
		info:    pass.TypesInfo,
		decls:   map[*types.Func]*ast.FuncDecl{},
		assigns: map[*types.Var][]ast.Expr{},
		effects: map[*ast.FuncLit]bool{},
	}
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fn, ok := idx.info.Defs[fd.Name].(*types.Func); ok {
					idx.decls[fn] = fd
				}
			}
		}
		ast.Inspect(f, idx.recordAssigns)
	}
	// Effects are marked once every assignment is known, so that a
	// literal assigned to a variable after the variable is used is found.
	for _, f := range pass.Files {
		ast.Inspect(f, idx.recordEffects)
	}
	return idx
}

// recordAssigns records the values assigned to variables at n.
func (idx *index) recordAssigns(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.AssignStmt:
		for i, lhs := range n.Lhs {
			if v := idx.variable(lhs); v != nil {
				idx.assigns[v] = append(idx.assigns[v], assigned(n.Rhs, i))
			}
		}
	case *ast.ValueSpec:
		for i, name := range n.Names {
			if v, ok := idx.info.Defs[name].(*types.Var); ok && len(n.Values) > 0 {
				idx.assigns[v] = append(idx.assigns[v], assigned(n.Values, i))
			}
		}
	}
	return true
}

// assigned is the value the i-th variable of an assignment from values
// takes: values[i], or the one call of a tuple assignment (v, err := f()),
// which stands for every variable it assigns.
func assigned(values []ast.Expr, i int) ast.Expr {
	if len(values) == 1 {
		return values[0]
	}
	return values[i]
}

// variable is the variable e names, or nil.
func (idx *index) variable(e ast.Expr) *types.Var {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return nil
	}
	if v, ok := idx.info.Defs[id].(*types.Var); ok {
		return v
	}
	v, _ := idx.info.Uses[id].(*types.Var)
	return v
}

// recordEffects marks the function literals n gives loom as effects.
func (idx *index) recordEffects(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CallExpr:
		if i, ok := effectArgs[loomName(calleeFunc(idx.info, n))]; ok && i < len(n.Args) {
			idx.markEffect(n.Args[i])
		}
	case *ast.CompositeLit:
		if isNamed(idx.info.TypeOf(n), loomPath, "Task") {
			for _, name := range taskEffectFields {
				if v := field(n, name); v != nil {
					idx.markEffect(v)
				}
			}
		}
	case *ast.AssignStmt:
		if len(n.Lhs) == len(n.Rhs) {
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && slices.Contains(taskEffectFields, sel.Sel.Name) {
					if s := idx.info.Selections[sel]; s != nil && isNamed(s.Recv(), loomPath, "Task") {
						idx.markEffect(n.Rhs[i])
					}
				}
			}
		}
	}
	return true
}

// markEffect marks e as an effect: a function literal, or every function
// literal assigned to the variable e names.
func (idx *index) markEffect(e ast.Expr) {
	if lit, ok := ast.Unparen(e).(*ast.FuncLit); ok {
		idx.effects[lit] = true
		return
	}
	if v := idx.variable(e); v != nil {
		for _, val := range idx.assigns[v] {
			if lit, ok := ast.Unparen(val).(*ast.FuncLit); ok {
				idx.effects[lit] = true
			}
		}
	}
}

// isEffect reports whether lit is not flow code: loom runs it as an
// effect, or its signature is an effect's.
func (idx *index) isEffect(lit *ast.FuncLit) bool {
	if idx.effects[lit] {
		return true
	}
	sig, ok := idx.info.TypeOf(lit).(*types.Signature)
	return ok && isEffectSignature(sig)
}
