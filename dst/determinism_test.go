package dst_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dst"
)

// TestDeterminism runs seeds twice and compares the two runs byte for
// byte: the schedule, what every operation did, the verdicts and every
// final log.
func TestDeterminism(t *testing.T) {
	determinism(t, &dst.Simulation{Flows: sequentialFlows()}, 40)
}

// TestDeterminismOfParallelBranches runs seeds of Parallel blocks alone:
// the seed interleaves their branches (loom.Interleaver), so two runs of
// a seed record the same log.
func TestDeterminismOfParallelBranches(t *testing.T) {
	determinism(t, &dst.Simulation{Flows: []dst.Flow{{Flow: parallel, Input: smallInput}}}, 20)
}

func determinism(t *testing.T, sim *dst.Simulation, seeds uint64) {
	t.Helper()
	for seed := uint64(1); seed <= seeds; seed++ {
		a, b := sim.Run(seed), sim.Run(seed)
		if sa, sb := a.Schedule.String(), b.Schedule.String(); sa != sb {
			t.Fatalf("seed %d: two runs drew different schedules:\n%s\nvs\n%s\ntraces:\n%s\nvs\n%s", seed, sa, sb,
				strings.Join(a.Trace, "\n"), strings.Join(b.Trace, "\n"))
		}
		if ta, tb := strings.Join(a.Trace, "\n"), strings.Join(b.Trace, "\n"); ta != tb {
			t.Fatalf("seed %d: two runs did different things:\n%s\nvs\n%s", seed, ta, tb)
		}
		if !bytes.Equal(a.Logs, b.Logs) {
			t.Fatalf("seed %d: two runs left different logs:\n%s\nvs\n%s", seed, a.Logs, b.Logs)
		}
		if ea, eb := errString(a.Err()), errString(b.Err()); ea != eb {
			t.Fatalf("seed %d: two runs judged differently: %s vs %s", seed, ea, eb)
		}
		// A replay of the recorded schedule is the same run again.
		c := sim.Replay(a.Schedule)
		if !bytes.Equal(a.Logs, c.Logs) || a.Schedule.String() != c.Schedule.String() {
			t.Fatalf("seed %d: the replay of its schedule differs from the run:\n%s\nvs\n%s", seed, a.Schedule, c.Schedule)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
