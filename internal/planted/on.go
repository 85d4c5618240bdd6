//go:build loom_planted

package planted

import "sync/atomic"

var active atomic.Int64

// Active reports whether f is planted.
func Active(f Fault) bool { return active.Load()&(1<<f) != 0 }

// Plant switches f on for the whole process and returns the function that
// switches it off again. Only a build with the loom_planted tag has it.
func Plant(f Fault) (undo func()) {
	active.Or(1 << f)
	return func() { active.And(^(1 << f)) }
}
