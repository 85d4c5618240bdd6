package schedule

import (
	"fmt"
	"strings"
	"time"
)

// TickIDPrefix starts every execution id TickID mints.
const TickIDPrefix = "sched:"

// TimerPrefix starts the key of every schedule's timer: "schedule:<name>".
// A runtime's timer poller routes the timers with this prefix to
// Scheduler.Fire.
const TimerPrefix = "schedule:"

// MaxNameBytes caps a schedule name, so ids and timer keys stay far below
// event.MaxIDBytes.
const MaxNameBytes = 128

// tickLayout renders a tick in UTC at second precision; always 20 bytes
// for the years 0000 to 9999.
const tickLayout = "2006-01-02T15:04:05Z"

// TickID returns the execution id of schedule name's tick at tick:
//
//	sched:<name>:<tick in UTC, RFC 3339, whole seconds>
//
// e.g. "sched:nightly-report:2024-03-10T07:00:00Z". The id depends on
// nothing but its arguments, so every node that sees a tick mints the same
// id and the runtime's duplicate-start refusal lets only one of them start
// it. The format is unambiguous because a valid name (ValidateName) holds
// no ':' and the tick has a fixed layout; ParseTickID inverts it. TickID
// itself does not validate name, and it drops sub-second digits (ticks are
// whole seconds).
func TickID(name string, tick time.Time) string {
	return TickIDPrefix + name + ":" + tick.UTC().Format(tickLayout)
}

// ParseTickID splits an id minted by TickID into the schedule's name and the
// tick (in UTC). ok is false for any other id, including one whose name is
// not valid or whose tick is not in TickID's exact layout.
func ParseTickID(id string) (name string, tick time.Time, ok bool) {
	rest, ok := strings.CutPrefix(id, TickIDPrefix)
	if !ok {
		return "", time.Time{}, false
	}
	name, stamp, ok := strings.Cut(rest, ":")
	if !ok || ValidateName(name) != nil {
		return "", time.Time{}, false
	}
	tick, err := time.Parse(tickLayout, stamp)
	if err != nil || tick.Format(tickLayout) != stamp {
		return "", time.Time{}, false
	}
	return name, tick, true
}

// TimerKey returns the key of schedule name's timer: TimerPrefix + name.
func TimerKey(name string) string { return TimerPrefix + name }

// ValidateName accepts a schedule name of 1 to MaxNameBytes bytes made of
// ASCII letters, digits, '-', '_', '.' and '/', starting with a letter or a
// digit: no ':' (the separator of TickID), no space, no control character.
// A refusal is an *InvalidScheduleError with Field "name".
func ValidateName(name string) error {
	refuse := func(reason string) error {
		return &InvalidScheduleError{Name: name, Field: "name", Reason: reason}
	}
	switch {
	case name == "":
		return refuse("empty")
	case len(name) > MaxNameBytes:
		return refuse(fmt.Sprintf("longer than %d bytes", MaxNameBytes))
	case !isAlnum(name[0]):
		return refuse("must start with an ASCII letter or digit")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' && c != '/' {
			return refuse(fmt.Sprintf("byte %d is not one of A-Z a-z 0-9 - _ . /", i))
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
