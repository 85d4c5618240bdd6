//go:build !loom_planted

package planted

// Active reports whether f is planted: never, in a build without the
// loom_planted tag.
func Active(Fault) bool { return false }
