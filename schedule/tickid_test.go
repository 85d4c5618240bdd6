package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
)

func TestTickIDFormat(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2024, time.March, 31, 3, 0, 0, 0, berlin) // 01:00Z
	cases := []struct {
		name string
		tick time.Time
		want string
	}{
		{"nightly", tick, "sched:nightly:2024-03-31T01:00:00Z"},
		{"billing/eu.v2_run-1", tick, "sched:billing/eu.v2_run-1:2024-03-31T01:00:00Z"},
		{"x", tick.Add(900 * time.Millisecond), "sched:x:2024-03-31T01:00:00Z"}, // whole seconds
		{"x", time.Date(2024, 11, 3, 1, 30, 0, 0, time.FixedZone("EDT", -4*3600)), "sched:x:2024-11-03T05:30:00Z"},
	}
	for _, tc := range cases {
		got := TickID(tc.name, tc.tick)
		if got != tc.want {
			t.Errorf("TickID(%q, %v) = %q, want %q", tc.name, tc.tick, got, tc.want)
		}
		if err := event.ValidateID("execution id", got); err != nil {
			t.Errorf("TickID %q fails event.ValidateID: %v", got, err)
		}
		name, back, ok := ParseTickID(got)
		if !ok || name != tc.name || !back.Equal(tc.tick.Truncate(time.Second)) || back.Location() != time.UTC {
			t.Errorf("ParseTickID(%q) = %q, %v, %v", got, name, back, ok)
		}
	}
	long := strings.Repeat("n", MaxNameBytes)
	if id := TickID(long, tick); len(id) > event.MaxIDBytes || event.ValidateID("execution id", id) != nil {
		t.Errorf("the longest name makes an invalid id (%d bytes)", len(id))
	}
}

// TestTickIDIsDeterministic: the id depends only on the schedule and the
// instant, not on the zone the tick is expressed in — two nodes agree.
func TestTickIDIsDeterministic(t *testing.T) {
	e1 := mustParse(t, "30 2 * * *", "America/New_York")
	e2 := mustParse(t, "30 2 * * *", "America/New_York")
	after := utc(t, "2024-03-09T12:00:00Z")
	a, b := e1.Next(after), e2.Next(after.In(time.FixedZone("elsewhere", 5*3600)))
	if TickID("s", a) != TickID("s", b.UTC()) || TickID("s", a) != "sched:s:2024-03-10T07:00:00Z" {
		t.Errorf("ids differ: %q, %q", TickID("s", a), TickID("s", b))
	}
}

func TestParseTickIDRefuses(t *testing.T) {
	for _, id := range []string{
		"", "sched:", "sched:x", "sched:x:", "nightly:2024-03-31T01:00:00Z",
		"schedule:x:2024-03-31T01:00:00Z", "sched::2024-03-31T01:00:00Z",
		"sched:a:b:2024-03-31T01:00:00Z", "sched:x:2024-03-31T01:00:00+00:00",
		"sched:x:2024-03-31T01:00:00.5Z", "sched:x:2024-3-31T01:00:00Z", "sched:x y:2024-03-31T01:00:00Z",
	} {
		if name, tick, ok := ParseTickID(id); ok {
			t.Errorf("ParseTickID(%q) = %q, %v, true", id, name, tick)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{"a", "nightly", "Billing-EU", "team/report.v2", "0_9", strings.Repeat("a", MaxNameBytes)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q): %v", name, err)
		}
	}
	for _, name := range []string{
		"", "a:b", "a b", "tab\there", "nl\n", "-lead", ".dot", "/slash", "é", "a\x00",
		strings.Repeat("a", MaxNameBytes+1),
	} {
		err := ValidateName(name)
		var ie *InvalidScheduleError
		if !errors.As(err, &ie) || ie.Field != "name" || !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateName(%q) = %v, want an *InvalidScheduleError on name", name, err)
		}
	}
}

func TestTimerKey(t *testing.T) {
	if got := TimerKey("nightly"); got != "schedule:nightly" || !strings.HasPrefix(got, TimerPrefix) {
		t.Errorf("TimerKey = %q", got)
	}
}
