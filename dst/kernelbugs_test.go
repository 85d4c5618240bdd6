package dst_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dst"
)

// knownKernelBugs are the kernel bugs DST found and the kernel has not
// fixed yet. TestDST logs the seeds that break only these instead of
// failing; each has a test below that replays its shrunk schedule and
// asserts the bug is still there, so a fix makes that test fail and says
// to move the entry out of this list (and the test to asserting a pass).
var knownKernelBugs = []dst.KnownIssue{
	{
		Invariant: dst.InvTimerOnce, Contains: "is the second timer of the park",
		Note: "a timer's answer (TIMER_FIRED, EXECUTION_RESUMED) is committed as two events the journal may write in " +
			"two appends; a crash between them leaves the park open with its timer fired, and the timer fires again " +
			"(TestKernelBugTimerFiresTwice)",
	},
	{
		Invariant: dst.InvCallReturns, Contains: "Runtime.Send did not return",
		Note: "Send delivers to a sticky select park in place (deliver → drive.deliverPending) on the caller's goroutine; " +
			"a journal failure there calls drive.abort, whose runtime.Goexit ends the caller's goroutine, and the " +
			"parked flow stays claimed until the process closes (TestKernelBugSendGoexit)",
	},
	{
		Invariant: dst.InvResumable, Contains: "to its select's topic",
		Note: "a Send right after a select parks races the park's own look at its inbox: parkSticky takes the park out " +
			"of the registry while it looks, the Send's delivery then finds the flow running, is refused, and the " +
			"refusal is swallowed, so the message waits for the drive's look (if it comes after the append), the next " +
			"Send or a Recover. The Go scheduler decides it, so no schedule pins it",
	},
}

// TestKernelBugTimerFiresTwice pins the shrunk schedule of the first known
// kernel bug: a crash at the EXECUTION_RESUMED of a sleep's timer (the
// TIMER_FIRED before it durable) makes the next process fire the same
// timer again, so the park at #4 records two TIMER_FIRED.
func TestKernelBugTimerFiresTwice(t *testing.T) {
	sim := &dst.Simulation{Flows: sequentialFlows()}
	res := sim.Replay(dst.MustParseSchedule(`
seed 98
config durability=step-durable snapshot-every=5 leases=true sticky=true
start x3 timed 1
advance 3180000
advance 960000
fault crash x3 6 @2
`))
	expectKnown(t, res, knownKernelBugs[0])
}

// TestKernelBugSendGoexit pins the shrunk schedule of the second known
// kernel bug: the in-place delivery of a Send to a select parked in
// memory hits a crash at its MESSAGE_CONSUMED, and runtime.Goexit ends
// the goroutine that called Send. Whether the delivery takes the in-place
// path is a race with the park's own look at its inbox, so the replay
// runs a few times (it takes it nearly always).
func TestKernelBugSendGoexit(t *testing.T) {
	sim := &dst.Simulation{Flows: allFlows()}
	schedule := dst.MustParseSchedule(`
seed 11
config durability=step-durable snapshot-every=5 leases=true sticky=true
start x2 inbox 8
send x2 orders 96
fault crash x2 2 @1
`)
	var res *dst.Result
	for range 10 {
		if res = sim.Replay(schedule); res.Failed() {
			break
		}
	}
	expectKnown(t, res, knownKernelBugs[1])
}

// expectKnown asserts that res breaks bug, and no invariant but known
// kernel bugs.
func expectKnown(t *testing.T, res *dst.Result, bug dst.KnownIssue) {
	t.Helper()
	found := false
	for _, v := range res.Violations {
		switch {
		case matches(bug, v):
			found = true
		case !slices.ContainsFunc(knownKernelBugs, func(k dst.KnownIssue) bool { return matches(k, v) }):
			t.Errorf("unexpected violation: %s", v)
		}
	}
	if !found {
		t.Fatalf("the pinned schedule no longer breaks %s (%q): if the kernel fixed it, move it out of knownKernelBugs "+
			"and make this test assert a pass\ntrace:\n%s", bug.Invariant, bug.Contains, strings.Join(res.Trace, "\n"))
	}
}

func matches(k dst.KnownIssue, v dst.Violation) bool {
	return v.Invariant == k.Invariant && strings.Contains(v.Detail, k.Contains)
}
