package dst_test

import (
	"errors"
	"testing"

	"github.com/loom-kernel/loom/dst"
)

// TestScheduleTextRoundTrips checks that a recorded schedule's text form
// reads back to the same schedule, so a pinned schedule is the one that
// ran.
func TestScheduleTextRoundTrips(t *testing.T) {
	sim := &dst.Simulation{Flows: sequentialFlows()}
	for seed := uint64(1); seed <= 20; seed++ {
		sch := sim.Run(seed).Schedule
		back, err := dst.ParseSchedule(sch.String())
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, sch)
		}
		if back.String() != sch.String() {
			t.Fatalf("seed %d: the text form does not read back:\n%s\nvs\n%s", seed, sch, back)
		}
	}
}

// TestParseScheduleRefusesMalformedLines checks that a line the parser
// cannot read is a *ScheduleError naming it.
func TestParseScheduleRefusesMalformedLines(t *testing.T) {
	for _, text := range []string{
		"seed x",
		"config durability=fast",
		"start x1 sequential",
		"start x1 sequential {not json",
		"advance soon",
		"crash now",
		"fault meteor x1 3",
		"fault crash x1",
		"teleport x1",
	} {
		_, err := dst.ParseSchedule("# a comment\n\n" + text)
		var se *dst.ScheduleError
		if !errors.As(err, &se) || !errors.Is(err, dst.ErrSchedule) || se.Line != 3 {
			t.Errorf("%q: got %v, want a *ScheduleError at line 3", text, err)
		}
	}
}
