// Package effect is a stub of github.com/loom-kernel/loom/effect for the
// loomvet tests: an effect's context, which marks a function as an effect.
package effect

import "encoding/json"

type Context struct{ StepID string }

type Func func(ec *Context, input json.RawMessage) (json.RawMessage, error)
