// Package helpers holds the cases of functions flow code calls: they are
// flow code, checked transitively within the package.
package helpers

import (
	"context"
	"math/rand"
	"time"

	"github.com/loom-kernel/loom"
)

var Helpers = loom.NewFlow("helpers", func(ctx *loom.Context, in []int) (int, error) {
	sum := total(in)
	var o order
	o.stamp()
	sum += helperVar()
	sum += first(in)
	sum += recurse(3)
	n, err := loom.Run(ctx, fetchStep, "id")
	return sum + len(n), err
})

// Other uses the same helpers: each finding is reported once.
var Other = loom.NewFlow("other", func(ctx *loom.Context, in []int) (int, error) {
	return total(in), nil
})

var Named = loom.NewFlow("named", namedBody)

// namedBody is a flow body declared as a function.
func namedBody(ctx *loom.Context, in int) (int, error) {
	_ = time.Now() // want `^time.Now in flow code reads the wall clock, which a replay reads again and finds changed: use loom.Now\(ctx\), a recorded decision$`
	return in, nil
}

func total(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n + deep()
}

func deep() int {
	return rand.Intn(3) // want `math/rand.Intn in flow code .* \(in deep, reached from flow "helpers"\)$`
}

type order struct{ at time.Time }

func (o *order) stamp() {
	o.at = time.Now() // want `time.Now in flow code .* \(in order.stamp, reached from flow "helpers"\)$`
}

var helperVar = func() int {
	return rand.Intn(2) // want `math/rand.Intn in flow code .* \(in helperVar, reached from flow "helpers"\)$`
}

func first[T any](xs []T) T {
	_ = time.Now() // want `\(in first, reached from flow "helpers"\)$`
	return xs[0]
}

func recurse(n int) int {
	if n == 0 {
		return 0
	}
	return recurse(n - 1)
}

// unused is never called from flow code: not flow code.
func unused() time.Time { return time.Now() }

// fetch is a step's function, given to NewStep by name: not flow code, and
// neither is what only it calls.
func fetch(ctx context.Context, id string) (string, error) { return stampOf(id), nil }

func stampOf(id string) string { return time.Now().String() + id }

var fetchStep = loom.NewStep("fetch", fetch)
