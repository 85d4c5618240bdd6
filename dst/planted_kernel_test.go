//go:build loom_planted

package dst_test

import (
	"testing"
	"time"

	"github.com/loom-kernel/loom/dst"
	"github.com/loom-kernel/loom/internal/planted"
)

// The kernel's planted faults (package internal/planted, built in only
// under the loom_planted tag): each is a kernel bug of the kind DST is
// for, and the default seed budget must find it and shrink it to a short
// schedule. scripts/test.sh runs these with the tag.

func TestPlantedKernelBarrierAcksBeforeTheDurableWrite(t *testing.T) {
	defer planted.Plant(planted.BarrierEarly)()
	// The effect then races the write it should have waited for.
	findPlanted(t, &dst.Simulation{Flows: sequentialFlows(), Attempts: 5, WaitTimeout: 500 * time.Millisecond}, dst.InvStepRerun)
}

func TestPlantedKernelAnswerDurableWithoutItsResume(t *testing.T) {
	defer planted.Plant(planted.UnitSplit)()
	findPlanted(t, &dst.Simulation{Flows: sequentialFlows()}, dst.InvTimerOnce)
}

func TestPlantedKernelInDoubtStepRunsAgain(t *testing.T) {
	defer planted.Plant(planted.InDoubtRerun)()
	findPlanted(t, &dst.Simulation{Flows: sequentialFlows()}, dst.InvStepRerun)
}
