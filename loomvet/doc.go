// Package loomvet is a go/analysis analyzer for Loom flow code: it reports
// what would make a flow take another path when the kernel replays it.
//
// A flow body — the function given to loom.NewFlow, or a loom.Flow's Body —
// is not run once. The kernel runs it again from the top over its log on
// every resume, recovery, replay check and fork, serving recorded steps by
// id and recorded decisions in order; the code must ask for the same
// steps, decisions and gates each time. loomvet checks each flow body, the
// closures in it (Parallel branches among them) and, transitively, the
// functions and methods of the same package it calls statically, and
// reports, by category:
//
//   - clock: time.Now, Since, Until, Sleep, After, AfterFunc, Tick,
//     NewTimer and NewTicker. Use loom.Now(ctx) (a recorded decision),
//     ctx.Sleep or ctx.SleepUntil (a durable timer), loom.OnTimer in
//     ctx.Select.
//   - random: the functions of math/rand and math/rand/v2 that draw from a
//     generator the log does not record (New, NewSource, NewPCG,
//     NewChaCha8 and NewZipf build one from what they are given and are
//     allowed), and anything of crypto/rand. Use loom.Random(ctx), or make
//     the value in a step.
//   - io: functions and methods of os, os/exec, os/signal, os/user,
//     io/ioutil, syscall, net, net/http, net/rpc, net/smtp and
//     database/sql, but for a few that do no I/O (os.IsNotExist,
//     http.StatusText, http.NewRequest, the methods of http.Header and
//     net.IP, Error and String methods…). Do I/O in a step (loom.Run,
//     ctx.Run), whose outcome is recorded.
//   - goroutine: a go statement. Use ctx.Parallel or loom.Parallel.
//   - channel: a select statement, a channel send or receive, a range over
//     a channel. Use ctx.Parallel or loom.Parallel, or the inbox
//     (loom.Receive, ctx.Select).
//   - map-order: a range over a map, or over maps.Keys, maps.Values or
//     maps.All of one, that binds a key or a value. Range over
//     slices.Sorted(maps.Keys(m)).
//   - global: an assignment or increment of a package-level variable, or
//     of a field, element or pointee of one.
//   - loop-id: in a loop (a closure made in a loop counts as in it),
//     loom.Run of a step not built in the loop — by Iter, Retry or
//     NewStep under a non-constant id, or taken from a range or an index —
//     and ctx.Run, ctx.Decide, loom.Decide, loom.SpawnChild or ctx.Execute
//     of a loom.Task literal under a constant id. Use step.Iter(i) or a
//     loop-varying id.
//
// Effects are not flow code: they run live once and are recorded, so they
// may read the clock, draw random numbers and do I/O. loomvet does not
// descend into the function given to loom.NewStep, loom.Simulation,
// ctx.Run, ctx.Decide or loom.Decide (directly or through a variable), a
// loom.Task's Invoke or Simulate, nor into any function literal that takes
// a context.Context or an *effect.Context (the signature of every effect,
// agent tool and registered effect; flow code takes a *loom.Context).
//
// Flow bodies are found by type: calls of the function object
// github.com/loom-kernel/loom.NewFlow (however the package is imported),
// loom.Flow composite literals with a Body and assignments to a Flow's
// Body. A body may be a function literal, a function or method of the
// package, or a variable assigned one.
//
// # Annotations
//
// A comment
//
//	//loomvet:ok <reason>
//
// silences every finding of its own line and of the next line, so it goes
// on the reported line or the line above. The reason is required: it is what a reviewer reads. An
// annotation without one is reported (category annotation) and silences
// nothing. On a range over a map, the kernel's own markers
// //loom:sorted <reason> and //loom:order-independent <reason>
// (spec/purity_test.go) are accepted as well.
//
// # Running it
//
// cmd/loomvet is the standalone command (go run ./cmd/loomvet ./...), which
// also runs under go vet -vettool; docs/loomvet.md is the guide.
//
// # Limits
//
// loomvet follows static calls within one package: a helper of another
// package, an interface method or a function value given in from outside
// is not checked (nor are bodies built in another package). It judges a
// loop-id from the code of one function: a step passed into a helper
// called in a loop is not seen as in that loop. A write to global state
// through a method (a sync/atomic counter, a map behind a mutex) or through
// a pointer held in a local variable is not seen, and neither is a read of
// one.
package loomvet
