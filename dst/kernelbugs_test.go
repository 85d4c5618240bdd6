package dst_test

import (
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dst"
)

// knownKernelBugs are the kernel bugs DST found and the kernel has not
// fixed yet: TestDST logs the seeds that break only these instead of
// failing. Each entry gets a test below that replays its shrunk schedule
// and asserts the bug is still there; the fix turns it into a regression
// test asserting a pass, as the ones below are. Empty: DST's three
// findings so far are fixed.
var knownKernelBugs []dst.KnownIssue

// TestTimerFiresOnceAcrossACrashInItsAnswer replays the shrunk schedule of
// DST's first kernel finding: a crash at the EXECUTION_RESUMED of a
// sleep's timer. The timer's answer (TIMER_FIRED, EXECUTION_RESUMED) was
// two journal commits the tail could write in two appends, so the crash
// could leave TIMER_FIRED durable with the park still open, and the next
// process fired the timer again. The answer is one commit now
// (journal.CommitAll): the log holds both or neither.
func TestTimerFiresOnceAcrossACrashInItsAnswer(t *testing.T) {
	sim := &dst.Simulation{Flows: sequentialFlows()}
	res := sim.Replay(dst.MustParseSchedule(`
seed 98
config durability=step-durable snapshot-every=5 leases=true sticky=true
start x3 timed 1
advance 3180000
advance 960000
fault crash x3 6 @2
`))
	expectPass(t, res)
}

// TestSendToAStickySelectSurvivesAJournalFailure replays the shrunk
// schedule of DST's second kernel finding: a Send delivering in place to a
// select parked in memory hits a crash at its MESSAGE_CONSUMED. The
// delivery ran on the sender's goroutine and aborted the drive with
// runtime.Goexit, so Send never returned and the flow stayed claimed. It
// now evicts the park instead (deliverInPlace), and Send returns. Whether
// the delivery takes the in-place path is a race with the park's own look
// at its inbox, so the replay runs a few times.
func TestSendToAStickySelectSurvivesAJournalFailure(t *testing.T) {
	sim := &dst.Simulation{Flows: allFlows()}
	schedule := dst.MustParseSchedule(`
seed 11
config durability=step-durable snapshot-every=5 leases=true sticky=true
start x2 inbox 8
send x2 orders 96
fault crash x2 2 @1
`)
	for range 10 {
		expectPass(t, sim.Replay(schedule))
	}
}

// expectPass asserts that res broke no invariant.
func expectPass(t *testing.T, res *dst.Result) {
	t.Helper()
	for _, v := range res.Violations {
		t.Errorf("violation: %s", v)
	}
	if t.Failed() {
		t.Fatalf("trace:\n%s", strings.Join(res.Trace, "\n"))
	}
}
