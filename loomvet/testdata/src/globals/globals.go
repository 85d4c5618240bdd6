// Package globals holds the cases of the global check.
package globals

import (
	"context"

	"github.com/loom-kernel/loom"

	"globals/shared"
)

var (
	counter int
	seen    = map[string]bool{}
	last    struct{ id string }
	ids     []string
	current *struct{ n int }
)

// record keeps process state in a step, which runs once and is recorded.
var record = loom.NewStep("record", func(ctx context.Context, id string) (int, error) {
	counter++
	return counter, nil
})

var Globals = loom.NewFlow("globals", func(ctx *loom.Context, id string) (int, error) {
	counter++                            // want `assignment to package-level variable counter in flow code: it is not in the log.*: keep flow state in local variables, or record it with a step`
	counter += 2                         // want `package-level variable counter`
	seen[id] = true                      // want `package-level variable seen`
	last.id = id                         // want `package-level variable last`
	ids = append(ids, id)                // want `package-level variable ids`
	current.n = 1                        // want `package-level variable current`
	shared.Total = 3                     // want `package-level variable Total`
	for _, ids[0] = range []string{id} { // want `package-level variable ids`
	}

	// Local state.
	local := 0
	local++
	m := map[string]bool{}
	m[id] = true
	var s struct{ id string }
	s.id = id
	n, err := loom.Run(ctx, record, id)
	return n + local, err
})
