// Package notloom declares a NewFlow that is not loom's: loomvet matches
// the function object, not its name.
package notloom

import "github.com/loom-kernel/loom"

func NewFlow[In, Out any](id string, body func(ctx *loom.Context, in In) (Out, error)) *loom.Flow {
	return nil
}
