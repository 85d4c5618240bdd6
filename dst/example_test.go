package dst_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dst"
)

// A flow of one step and one human gate, simulated over twenty seeds:
// each seed draws the runtime configuration, the executions, the
// operations (answers, clock moves, crashes, recoveries, cancels) and the
// store faults, and every run is checked against every invariant.
func ExampleSimulation_Run() {
	add := loom.NewStep("add", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	flow := loom.NewFlow("approve-sum", func(c *loom.Context, n int) (int, error) {
		v, err := loom.Run(c, add, n)
		if err != nil {
			return 0, err
		}
		if ok, err := loom.Suspend[bool](c, "approve"); err != nil || !ok {
			return 0, err
		}
		return v, nil
	})
	sim := &dst.Simulation{Flows: []dst.Flow{{Flow: flow, Input: func(r *rand.Rand) any { return r.IntN(100) }}}}
	failed := 0
	for seed := uint64(1); seed <= 20; seed++ {
		if res := sim.Run(seed); res.Failed() {
			failed++
			fmt.Println(res.Err())
		}
	}
	fmt.Printf("20 seeds, %d broke an invariant\n", failed)
	// Output: 20 seeds, 0 broke an invariant
}

// A schedule pinned in a test: the process crashes at event #3 of x1 (its
// park on the gate), the next process recovers it, and the answer goes to
// the recovered park.
func ExampleSimulation_Replay() {
	add := loom.NewStep("add", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	flow := loom.NewFlow("approve-sum", func(c *loom.Context, n int) (int, error) {
		v, err := loom.Run(c, add, n)
		if err != nil {
			return 0, err
		}
		if ok, err := loom.Suspend[bool](c, "approve"); err != nil || !ok {
			return 0, err
		}
		return v, nil
	})
	sim := &dst.Simulation{Flows: []dst.Flow{{Flow: flow}}}
	res := sim.Replay(dst.MustParseSchedule(`
seed 7
config durability=step-durable snapshot-every=-1 leases=false sticky=true
start x1 approve-sum 41
answer x1 approve true
fault crash x1 3
`))
	fmt.Println(strings.Join(res.Trace, "\n"))
	fmt.Println("violations:", len(res.Violations))
	// Output:
	// 0 start x1 approve-sum 41: ok
	//   restart: process 2
	//   recovered 1
	// 1 answer x1 approve true: ok
	// violations: 0
}
