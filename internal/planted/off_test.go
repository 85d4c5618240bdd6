//go:build !loom_planted

package planted

import "testing"

// A build without the tag plants nothing.
func TestNoFaultIsActiveWithoutTheTag(t *testing.T) {
	for _, f := range []Fault{BarrierEarly, UnitSplit, InDoubtRerun} {
		if Active(f) {
			t.Fatalf("fault %d is active in a build without loom_planted", f)
		}
	}
}
