package dst_test

import (
	"testing"

	"github.com/loom-kernel/loom/dst"
)

// TestDST runs the default seed budget (dst.DefaultSeeds, or -dst.seeds)
// across every flow shape; -dst.seed=N runs one seed and logs its trace.
func TestDST(t *testing.T) {
	sim := &dst.Simulation{Flows: allFlows()}
	sum := dst.Check(t, sim, dst.CheckOptions{Known: knownKernelBugs})
	t.Logf("dst: %d seeds in %s (%.0f seeds/min), %d failed", sum.Runs, sum.Elapsed.Round(1e6), sum.SeedsPerMinute(), len(sum.Failed))
}
