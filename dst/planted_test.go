package dst_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dst"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store/memstore"
)

// Planted faults prove the simulator can fail: each is a bug of the kind
// DST is for, planted outside the kernel, that the default seed budget
// must find and shrink to a short schedule.

// droppingStore is a store bug: it acknowledges a batch holding an
// EXECUTION_RECOVERED and writes nothing, the way a store that loses a
// write after a take-over would.
type droppingStore struct{ *memstore.EventStore }

func recovers(evs []event.Envelope) bool {
	for _, e := range evs {
		if e.Type == event.ExecutionRecovered {
			return true
		}
	}
	return false
}

func (s droppingStore) Append(ctx context.Context, id string, expected int64, evs []event.Envelope) error {
	if recovers(evs) {
		return nil
	}
	return s.EventStore.Append(ctx, id, expected, evs)
}

func (s droppingStore) AppendFenced(ctx context.Context, id string, token, expected int64, evs []event.Envelope) error {
	if recovers(evs) {
		return nil
	}
	return s.EventStore.AppendFenced(ctx, id, token, expected, evs)
}

// doubleRun is an effect-ring bug: it runs the effect of step twice.
func doubleRun(step string) effect.Middleware {
	return func(ec *effect.Context, in json.RawMessage, next effect.Func) (json.RawMessage, error) {
		if ec.StepID == step {
			if _, err := next(ec, in); err != nil {
				return nil, err
			}
		}
		return next(ec, in)
	}
}

// maxShrunkLen is how long a shrunk schedule of a planted fault may be.
const maxShrunkLen = 4

// shrinkRounds bounds the shrinks of a racy failure (see findPlanted).
const shrinkRounds = 4

// pinReplays is how many replays of a shrunk schedule may pass before one
// fails again.
const pinReplays = 20

// findPlanted runs seeds until one breaks invariant, and shrinks it.
func findPlanted(t *testing.T, sim *dst.Simulation, invariant string) {
	t.Helper()
	for seed := uint64(1); seed <= dst.DefaultSeeds; seed++ {
		res := sim.Run(seed)
		if !breaks(res, invariant) {
			continue
		}
		sh := sim.Shrink(res, 0)
		// A race in the code under test (Simulation.Attempts > 1) can make
		// a candidate pass the replays it was given and be kept: shrink the
		// shrunk schedule again, a few rounds, while that still cuts it.
		for round := 1; round < shrinkRounds && sim.Attempts > 1 && sh.Reproduced && sh.Result.Schedule.Len() > maxShrunkLen; round++ {
			again := sim.Shrink(sh.Result, 0)
			if !again.Reproduced || again.Result.Schedule.Len() >= sh.Result.Schedule.Len() {
				break
			}
			again.Replays += sh.Replays
			sh = again
		}
		if !sh.Reproduced || sh.Invariant != invariant {
			t.Fatalf("seed %d: the recorded schedule did not break %s again on replay (%v)", seed, invariant, sh.Result.Err())
		}
		if n := sh.Result.Schedule.Len(); n > maxShrunkLen {
			t.Fatalf("seed %d: shrunk to %d entries, want at most %d:\n%s", seed, n, maxShrunkLen, sh.Result.Schedule)
		}
		t.Logf("found at seed %d; shrunk from %d to %d entries in %d replays:\n%s", seed, res.Schedule.Len(),
			sh.Result.Schedule.Len(), sh.Replays, sh.Result.Schedule)
		// The shrunk schedule replays to the same failure: pin it so. A
		// planted race of the kernel's own (an acknowledgement before the
		// durable write) makes the failure depend on the Go scheduler, so
		// it must come back within a few replays, not at every one.
		var again *dst.Result
		for range pinReplays {
			if again = sim.Replay(sh.Result.Schedule); breaks(again, invariant) {
				return
			}
		}
		t.Fatalf("the shrunk schedule passed on %d replays:\n%s", pinReplays, strings.Join(again.Trace, "\n"))
	}
	t.Fatalf("no seed in %d broke %s", dst.DefaultSeeds, invariant)
}

func breaks(res *dst.Result, invariant string) bool {
	for _, v := range res.Violations {
		if v.Invariant == invariant {
			return true
		}
	}
	return false
}

func TestPlantedStoreDropsAcknowledgedAppend(t *testing.T) {
	sim := &dst.Simulation{Flows: sequentialFlows(),
		Events: func() dst.DurableEvents { return droppingStore{memstore.NewEventStore()} }}
	findPlanted(t, sim, dst.InvAckedLost)
}

func TestPlantedRingRunsEffectTwice(t *testing.T) {
	sim := &dst.Simulation{Flows: sequentialFlows(), Middleware: []effect.Middleware{doubleRun("charge")}}
	findPlanted(t, sim, dst.InvStepRerun)
}
