package schedule

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The oracle computes ticks from the rule's definition, independently of
// wallclock.go and match.go: it scans instants second by second, reads the
// wall clock through time.In, and decides which wall times match with
// robfig/cron's own Next on a UTC schedule (where no DST exists). Instant i
// ticks iff some matching wall time W has maxWall(<i) < W <= wall(i): i is
// then the first instant whose wall clock reaches W.

// oracleLead is how long before a window the oracle starts scanning, so its
// running maximum of the wall clock is right at the window's start (it must
// exceed the longest overlap: 2 hours is the most any zone repeats).
const oracleLead = 3 * 3600

// wallWindow holds the zone's wall clock for every second from start on,
// read through time.In, so the oracle reads each zone once per window.
type wallWindow struct {
	start int64
	walls []int64
}

func newWallWindow(loc *time.Location, from, to int64) wallWindow {
	w := wallWindow{start: from - oracleLead - 1, walls: make([]int64, 0, to-from+oracleLead+1)}
	for i := w.start; i < to; i++ {
		_, off := time.Unix(i, 0).In(loc).Zone()
		w.walls = append(w.walls, i+int64(off))
	}
	return w
}

func (w wallWindow) wall(i int64) int64 { return w.walls[i-w.start] }

// oracleTicks lists the ticks of expr in [from, to), for a window built
// with the same from and to.
func oracleTicks(t tb, expr string, win wallWindow, from, to int64) []int64 {
	t.Helper()
	sched, err := cronParser.Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	// firstMatchAfter is the first matching wall time strictly after w.
	firstMatchAfter := func(w int64) int64 { return sched.Next(time.Unix(w, 0).UTC()).Unix() }
	var ticks []int64
	maxWall := win.wall(from - oracleLead - 1)
	pending := firstMatchAfter(maxWall)
	for i := from - oracleLead; i < to; i++ {
		w := win.wall(i)
		if w <= maxWall {
			continue // the repeated pass of an overlap
		}
		if pending <= w && i >= from {
			ticks = append(ticks, i)
		}
		maxWall = w
		if pending <= maxWall {
			pending = firstMatchAfter(maxWall)
		}
	}
	return ticks
}

// exprTicks lists the ticks in [from, to) by iterating Next.
func exprTicks(e *Expr, from, to int64) []int64 {
	var out []int64
	for n := e.Next(time.Unix(from-1, 0)); n.Unix() < to; n = e.Next(n) {
		if len(out) > 0 && n.Unix() <= out[len(out)-1] {
			return append(out, n.Unix()) // not increasing: the caller's compare fails
		}
		out = append(out, n.Unix())
	}
	return out
}

// transitions returns the instants of year at which the zone's offset
// changes, found hour by hour and then to the second, without ZoneBounds.
func transitions(loc *time.Location, year int) []int64 {
	off := func(i int64) int { _, o := time.Unix(i, 0).In(loc).Zone(); return o }
	var out []int64
	from := time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
	to := time.Date(year+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix()
	for h := from; h < to; h += 3600 {
		if off(h) != off(h+3600) {
			s := h
			for off(s+1) == off(h) {
				s++
			}
			out = append(out, s+1)
		}
	}
	return out
}

var oracleExprs = []string{
	"* * * * *", "*/15 * * * *", "30 2 * * *", "0 1,2,3 * * *", "45 1 * * *",
	"15 2 * * *", "0 0 * * *", "*/20 * * * * *", "30 30 2 * * *", "7 * * * * *",
}

// TestNextMatchesOracleAroundTransitions compares Next with the oracle for
// six hours either side of both transitions of every table zone, for every
// expression of oracleExprs: no tick lost, none doubled. 2024's transitions
// are listed in the tz database; 2040's come from each zone's POSIX rule,
// where Go's ZoneBounds is approximate (the year's end, a day short in leap
// years: the last window checks that no tick sticks there).
func TestNextMatchesOracleAroundTransitions(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		var points []int64
		for _, year := range []int{2024, 2040} {
			tr := transitions(loc, year)
			if zone == "UTC" {
				tr = []int64{time.Date(year, time.March, 31, 1, 0, 0, 0, time.UTC).Unix()}
			} else if len(tr) < 2 {
				t.Fatalf("%s: %d transitions in %d, want 2", zone, len(tr), year)
			}
			points = append(points, tr...)
		}
		points = append(points, time.Date(2041, time.January, 1, 0, 0, 0, 0, loc).Unix())
		for _, at := range points {
			from, to := at-6*3600, at+6*3600
			win := newWallWindow(loc, from, to)
			for _, expr := range oracleExprs {
				e := mustParse(t, expr, zone)
				got, want := exprTicks(e, from, to), oracleTicks(t, expr, win, from, to)
				if !slices.Equal(got, want) {
					t.Errorf("%s %q around %s:\n got  %v\n want %v", zone, expr,
						time.Unix(at, 0).UTC().Format(time.RFC3339), fmtTicks(got, loc), fmtTicks(want, loc))
				}
			}
		}
	}
}

func fmtTicks(ticks []int64, loc *time.Location) []string {
	out := make([]string, len(ticks))
	for i, s := range ticks {
		out[i] = time.Unix(s, 0).In(loc).Format("01-02 15:04:05 MST")
	}
	return out
}

// propertyZones adds odd cases to the table's zones: 30- and 45-minute
// offsets, negative DST (Europe/Dublin), midnight transitions
// (America/Sao_Paulo until 2019), a 2-hour shift (Antarctica/Troll), a
// skipped day (Pacific/Apia).
var propertyZones = []string{
	"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC", "Asia/Kolkata",
	"Pacific/Chatham", "Europe/Dublin", "America/Sao_Paulo", "Antarctica/Troll", "Pacific/Apia",
	"America/St_Johns",
}

var propertyExprs = append(slices.Clone(oracleExprs),
	"@hourly", "@daily", "@weekly", "@monthly", "0 9-17 * * MON-FRI", "*/7 */3 * * *", "0 0 1,15 * *",
	"0 30 1 * * *", "59 59 23 * * *", "0 0 29 2 *", "5 4 * * SUN", "0 0 13 * FRI")

// TestNextProperties: for random expressions, zones and instants (half of
// them right at a transition), ticks are strictly increasing whole seconds,
// Next(t) > t, Prev(t) < t, Next and Prev bracket t with no tick between,
// Ticks agrees with Next, and the ticks of the following two hours are the
// oracle's. In UTC, Next also equals robfig/cron's own Next.
func TestNextProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		expr := rapid.SampledFrom(propertyExprs).Draw(rt, "expr")
		zone := rapid.SampledFrom(propertyZones).Draw(rt, "zone")
		sec := rapid.Int64Range(utc(rt, "1970-01-01T00:00:00Z").Unix(), utc(rt, "2060-01-01T00:00:00Z").Unix()).Draw(rt, "sec")
		e := mustParse(rt, expr, zone)
		at := time.Unix(sec, 0).In(e.Location())
		if rapid.Bool().Draw(rt, "nearTransition") {
			if _, end := at.ZoneBounds(); !end.IsZero() {
				at = end.Add(time.Duration(rapid.IntRange(-5400, 5400).Draw(rt, "offset")) * time.Second)
			}
		}
		at = at.Add(time.Duration(rapid.IntRange(0, 999).Draw(rt, "ms")) * time.Millisecond)

		next, prev := e.Next(at), e.Prev(at)
		if !next.After(at) || next.Nanosecond() != 0 {
			rt.Fatalf("Next(%v) = %v", at, next)
		}
		if !prev.Before(at) || prev.Nanosecond() != 0 {
			rt.Fatalf("Prev(%v) = %v", at, prev)
		}
		if n := e.Next(prev); n.Before(at) {
			rt.Fatalf("a tick %v between Prev %v and %v", n, prev, at)
		}
		if p := e.Prev(next); p.After(at) {
			rt.Fatalf("a tick %v between %v and Next %v", p, at, next)
		}

		var walked []time.Time
		for n := next; len(walked) < 40; n = e.Next(n) {
			if len(walked) > 0 && !n.After(walked[len(walked)-1]) {
				rt.Fatalf("ticks not increasing: %v then %v", walked[len(walked)-1], n)
			}
			walked = append(walked, n)
		}
		last := walked[len(walked)-1]
		if got := e.Ticks(at, last, 40); !slices.EqualFunc(got, walked, time.Time.Equal) {
			rt.Fatalf("Ticks(%v, %v, 40) = %v, want %v", at, last, got, walked)
		}

		from := at.Unix() + 1
		to := from + 2*3600
		got, want := exprTicks(e, from, to), oracleTicks(rt, expr, newWallWindow(e.Location(), from, to), from, to)
		if !slices.Equal(got, want) {
			rt.Fatalf("%s %q from %v:\n got  %v\n want %v", zone, expr, at, fmtTicks(got, e.Location()), fmtTicks(want, e.Location()))
		}

		if zone == "UTC" {
			sched, err := cronParser.Parse(expr) // robfig reads a UTC instant in UTC
			if err != nil {
				rt.Fatal(err)
			}
			if r := sched.Next(at.UTC()); !r.Equal(next) {
				rt.Fatalf("UTC Next(%v) = %v, robfig says %v", at, next, r)
			}
		}
	})
}
