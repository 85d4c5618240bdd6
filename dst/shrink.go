package dst

import "slices"

// DefaultShrinkBudget bounds the replays one Shrink makes.
const DefaultShrinkBudget = 400

// Shrunk is what Shrink found.
type Shrunk struct {
	// Result is the smallest failing run found: its Schedule is the one to
	// pin (Schedule.String, MustParseSchedule, Simulation.Replay).
	Result *Result
	// Invariant is the invariant every kept candidate broke: the first one
	// the original run broke.
	Invariant string
	// Reproduced says the original schedule, replayed, broke it again.
	Reproduced bool
	// Replays is how many replays the shrink made.
	Replays int
}

// Shrink cuts a failing run's schedule down while it still breaks the
// same invariant: greedily, first dropping faults one at a time (last
// first), then dropping runs of operations, halving the run length down
// to single operations (delta debugging), and again until nothing more
// can go or budget replays are spent (DefaultShrinkBudget when budget is
// 0). Each candidate is a Replay, so a dropped operation's dependants are
// skipped, and only the faults that still fire are kept; a candidate
// passes once it passed Simulation.Attempts replays. A passing res is
// returned as it is.
func (s *Simulation) Shrink(res *Result, budget int) Shrunk {
	if !res.Failed() {
		return Shrunk{Result: res}
	}
	return s.shrink(res, res.Violations[0].Invariant, nil, budget)
}

// shrink is Shrink against invariant, counting no violation known lists.
func (s *Simulation) shrink(res *Result, invariant string, known []KnownIssue, budget int) Shrunk {
	if budget <= 0 {
		budget = DefaultShrinkBudget
	}
	out := Shrunk{Result: res, Invariant: invariant}
	fails := func(sch Schedule) (rr *Result, ok bool) {
		for range max(s.Attempts, 1) {
			out.Replays++
			rr = s.Replay(sch)
			for _, v := range rr.Violations {
				if v.Invariant == invariant && !isKnown(v, known) {
					return rr, true
				}
			}
		}
		return rr, false
	}
	if rr, ok := fails(res.Schedule); ok {
		out.Reproduced, out.Result = true, rr
	} else {
		return out // a failure the schedule alone does not reproduce: nothing to shrink against
	}
	for changed := true; changed && out.Replays < budget; {
		changed = false
		for i := len(out.Result.Schedule.Faults) - 1; i >= 0 && out.Replays < budget; i-- {
			if i >= len(out.Result.Schedule.Faults) {
				continue
			}
			cand := out.Result.Schedule.clone()
			cand.Faults = slices.Delete(cand.Faults, i, i+1)
			if rr, ok := fails(cand); ok {
				out.Result, changed = rr, true
			}
		}
		for size := max(len(out.Result.Schedule.Ops)/2, 1); size >= 1 && out.Replays < budget; size /= 2 {
			for start := 0; start < len(out.Result.Schedule.Ops) && out.Replays < budget; {
				cand := out.Result.Schedule.clone()
				cand.Ops = slices.Delete(cand.Ops, start, min(start+size, len(cand.Ops)))
				if rr, ok := fails(cand); ok {
					out.Result, changed = rr, true
					continue
				}
				start += size
			}
		}
	}
	return out
}
