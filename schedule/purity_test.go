package schedule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// pureFiles are the pure core (STYLE 2): cron maths, the DST rule, ids and
// schedule validation. They read no clock and do no I/O; only scheduler.go
// touches a Starter, a TimerStore and a clock.
var pureFiles = []string{"expr.go", "match.go", "wallclock.go", "tickid.go", "policy.go", "errors.go"}

// impureImports are packages a pure file must not import: the kernel's I/O
// surfaces, the environment, randomness, concurrency.
var impureImports = map[string]bool{
	"context": true, "os": true, "net": true, "sync": true, "math/rand": true, "math/rand/v2": true,
	"crypto/rand": true, "database/sql": true, "log": true, "log/slog": true,
	"github.com/loom-kernel/loom": true, "github.com/loom-kernel/loom/store": true,
}

// clockFuncs read or wait on the wall clock.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTimer": true, "NewTicker": true,
}

func TestPureCoreReadsNoClockAndDoesNoIO(t *testing.T) {
	fset := token.NewFileSet()
	for _, name := range pureFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		timeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if impureImports[path] {
				t.Errorf("%s imports %s", name, path)
			}
			if path == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && clockFuncs[sel.Sel.Name] {
				t.Errorf("%s: time.%s reads the clock", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
