// Package discovery holds the ways a flow body is found: by the type of
// the call or literal, however loom is imported.
package discovery

import (
	"encoding/json"
	"time"

	kernel "github.com/loom-kernel/loom"

	"notloom"
)

var Renamed = kernel.NewFlow("renamed", func(ctx *kernel.Context, in int) (int, error) {
	_ = time.Now() // want `time.Now in flow code`
	return in, nil
})

var Explicit = kernel.NewFlow[int, int]("explicit", func(ctx *kernel.Context, in int) (int, error) {
	_ = time.Now() // want `time.Now in flow code`
	return in, nil
})

type service struct{}

func (service) body(ctx *kernel.Context, in int) (int, error) {
	_ = time.Now() // want `time.Now in flow code`
	return in, nil
}

var Method = kernel.NewFlow("method", service{}.body)

func build(id string) *kernel.Flow {
	body := func(ctx *kernel.Context, in int) (int, error) {
		_ = time.Now() // want `time.Now in flow code`
		return in, nil
	}
	return kernel.NewFlow(id, body)
}

var Untyped = &kernel.Flow{ID: "untyped", Body: func(ctx *kernel.Context, in json.RawMessage) (any, error) {
	_ = time.Now() // want `time.Now in flow code`
	return nil, nil
}}

func assigned() *kernel.Flow {
	f := &kernel.Flow{ID: "assigned"}
	f.Body = func(ctx *kernel.Context, in json.RawMessage) (any, error) {
		_ = time.Now() // want `time.Now in flow code`
		return nil, nil
	}
	return f
}

// Impostor is built by a NewFlow of another package: not a flow body.
var Impostor = notloom.NewFlow("impostor", func(ctx *kernel.Context, in int) (int, error) {
	_ = time.Now()
	return in, nil
})

// notAFlow takes a *loom.Context but no flow calls it: not flow code.
func notAFlow(ctx *kernel.Context) time.Time { return time.Now() }
