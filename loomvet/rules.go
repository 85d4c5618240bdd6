package loomvet

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
)

// clockFuncs are the functions of package time that read or wait on the
// wall clock, with what to use in flow code instead. Methods of the same
// name (time.Time.After) are pure and allowed.
var clockFuncs = map[string]string{
	"Now":       "reads the wall clock, which a replay reads again and finds changed: use loom.Now(ctx), a recorded decision",
	"Since":     "reads the wall clock, which a replay reads again and finds changed: take the time from loom.Now(ctx), a recorded decision",
	"Until":     "reads the wall clock, which a replay reads again and finds changed: take the time from loom.Now(ctx), a recorded decision",
	"Sleep":     "waits on the wall clock, and a crash or a replay waits again: use ctx.Sleep(d) or ctx.SleepUntil(t), a durable timer",
	"After":     "waits on a wall-clock timer the log does not record: use ctx.Sleep(d), or loom.OnTimer(d) in ctx.Select",
	"AfterFunc": "runs on a wall-clock timer the log does not record: use ctx.Sleep(d), or loom.OnTimer(d) in ctx.Select",
	"Tick":      "ticks on a wall-clock timer the log does not record: use ctx.Sleep(d) in a loop, or loom.OnTimer(d) in ctx.Select",
	"NewTimer":  "waits on a wall-clock timer the log does not record: use ctx.Sleep(d), or loom.OnTimer(d) in ctx.Select",
	"NewTicker": "ticks on a wall-clock timer the log does not record: use ctx.Sleep(d) in a loop, or loom.OnTimer(d) in ctx.Select",
}

// seededRand are the functions of math/rand and math/rand/v2 that draw
// nothing: they build a generator from the source or seed they are given,
// which is deterministic when that is (loom.Random gives one).
var seededRand = []string{"New", "NewSource", "NewPCG", "NewChaCha8", "NewZipf"}

// ioPackages are the packages whose functions and methods do I/O or read
// the process's environment.
var ioPackages = []string{
	"os", "os/exec", "os/signal", "os/user", "io/ioutil", "syscall",
	"net", "net/http", "net/rpc", "net/smtp", "database/sql",
}

// pureIOFuncs are functions of ioPackages that do no I/O: predicates on
// values and errors, parsing and formatting, building a request without
// sending it.
var pureIOFuncs = []string{
	"os.IsExist", "os.IsNotExist", "os.IsPermission", "os.IsTimeout", "os.IsPathSeparator",
	"net/http.StatusText", "net/http.CanonicalHeaderKey", "net/http.NewRequest", "net/http.NewRequestWithContext",
	"net.ParseIP", "net.ParseCIDR", "net.ParseMAC", "net.JoinHostPort", "net.SplitHostPort",
	"net.IPv4", "net.IPv4Mask", "net.CIDRMask",
}

// pureIOTypes are types of ioPackages whose methods do no I/O.
var pureIOTypes = []string{"net/http.Header", "net.IP", "net.IPNet", "net.IPMask", "net.HardwareAddr"}

// pureMethods are methods that describe a value or an error and, on any
// type of ioPackages, do no I/O.
var pureMethods = []string{"Error", "Unwrap", "String", "Timeout", "Temporary"}

// checkUse reports a use of a clock, random or I/O function (called or not:
// a function value called later reads the clock as well).
func (w *walker) checkUse(id *ast.Ident) {
	switch obj := w.info.Uses[id].(type) {
	case *types.Func:
		if obj.Pkg() == nil {
			return
		}
		path, name, pkgLevel := obj.Pkg().Path(), obj.Name(), obj.Signature().Recv() == nil
		switch {
		case path == "time" && pkgLevel && clockFuncs[name] != "":
			w.report(id.Pos(), catClock, "time."+name+" in flow code "+clockFuncs[name])
		case (path == "math/rand" || path == "math/rand/v2") && pkgLevel && !slices.Contains(seededRand, name):
			w.report(id.Pos(), catRandom, path+"."+name+" in flow code draws from a generator the log does not record, so a replay draws differently: use loom.Random(ctx), seeded by a recorded decision")
		case path == "crypto/rand":
			w.report(id.Pos(), catRandom, cryptoRandMessage(name))
		case slices.Contains(ioPackages, path) && !pureIO(obj):
			w.report(id.Pos(), catIO, funcName(obj)+" in flow code does I/O, which every replay does again and may find changed: do I/O in a step (loom.Run, ctx.Run), whose outcome is recorded")
		}
	case *types.Var:
		if obj.Pkg() != nil && obj.Pkg().Path() == "crypto/rand" && isPackageLevel(obj) {
			w.report(id.Pos(), catRandom, cryptoRandMessage(obj.Name()))
		}
	}
}

func cryptoRandMessage(name string) string {
	return "crypto/rand." + name + " in flow code draws bytes a replay cannot draw again: use loom.Random(ctx), or make the value in a step (loom.Run, ctx.Run) so it is recorded"
}

// pureIO reports whether fn, of one of ioPackages, does no I/O.
func pureIO(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	if recv == nil {
		return slices.Contains(pureIOFuncs, fn.Pkg().Path()+"."+fn.Name())
	}
	if slices.Contains(pureMethods, fn.Name()) {
		return true
	}
	named := namedOf(recv.Type())
	return named != nil && named.Obj().Pkg() != nil && slices.Contains(pureIOTypes, named.Obj().Pkg().Path()+"."+named.Obj().Name())
}

// funcName is how a diagnostic names fn: "os.ReadFile", "(*http.Client).Do",
// "net.Conn.Read".
func funcName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Pkg().Name() + "." + fn.Name()
	}
	t := types.TypeString(recv.Type(), func(p *types.Package) string { return p.Name() })
	if _, ptr := types.Unalias(recv.Type()).(*types.Pointer); ptr {
		return "(" + t + ")." + fn.Name()
	}
	return t + "." + fn.Name()
}

func isPackageLevel(v *types.Var) bool {
	return v.Pkg() != nil && v.Parent() == v.Pkg().Scope()
}

// checkWrite reports an assignment to lhs when it writes a package-level
// variable, or a field, element or pointee of one.
func (w *walker) checkWrite(lhs ast.Expr) {
	if v := w.packageVar(lhs); v != nil {
		w.report(lhs.Pos(), catGlobal, "assignment to package-level variable "+v.Name()+" in flow code: it is not in the log, so a replay, a recovery in another process or another execution sees what the last run left: keep flow state in local variables, or record it with a step")
	}
}

// packageVar is the package-level variable e writes into, or nil.
func (w *walker) packageVar(e ast.Expr) *types.Var {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			if v, ok := w.info.Uses[x].(*types.Var); ok && isPackageLevel(v) {
				return v
			}
			return nil
		case *ast.SelectorExpr:
			if s := w.info.Selections[x]; s != nil {
				if s.Kind() != types.FieldVal {
					return nil
				}
				e = x.X
				continue
			}
			if v, ok := w.info.Uses[x.Sel].(*types.Var); ok && isPackageLevel(v) {
				return v // pkg.Var
			}
			return nil
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		default:
			return nil
		}
	}
}

// checkRange reports a range over a map or over a channel, and a range
// that assigns to a package-level variable.
func (w *walker) checkRange(n *ast.RangeStmt) {
	if n.Tok == token.ASSIGN {
		for _, e := range []ast.Expr{n.Key, n.Value} {
			if e != nil {
				w.checkWrite(e)
			}
		}
	}
	t := w.info.TypeOf(n.X)
	if t == nil {
		return
	}
	if _, ok := t.Underlying().(*types.Chan); ok {
		w.report(n.For, catChannel, "range over a channel in flow code: when and what it receives is not in the log: use ctx.Parallel or loom.Parallel to fan out and collect, or the inbox (loom.Receive, ctx.Select) to wait for messages")
		return
	}
	if n.Key == nil && n.Value == nil {
		return // counts iterations only: the order cannot show
	}
	if w.inMapOrder(n.X, t) {
		w.report(n.For, catMapOrder, "range over a map in flow code: its order changes from run to run, and so can the steps, ids or output built in it: range over slices.Sorted(maps.Keys(m)), or say why the order cannot matter with //loomvet:ok <reason>")
	}
}

// inMapOrder reports whether ranging over x, of type t, visits a map in
// its order: a map, or maps.Keys, maps.Values or maps.All of one.
func (w *walker) inMapOrder(x ast.Expr, t types.Type) bool {
	if _, ok := t.Underlying().(*types.Map); ok {
		return true
	}
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return false
	}
	fn := calleeFunc(w.info, call)
	return fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "maps" && slices.Contains([]string{"Keys", "Values", "All"}, fn.Name())
}
