package schedule

import "time"

// This file holds the wall-clock arithmetic the DST rule is built from. It
// is pure: it reads no clock and keeps no state.
//
// Two time lines are involved. An instant is a Unix second (what a Timer's
// WakeAt and a tick are made of). A wall time is what the zone's clock
// reads, counted as seconds since 1970-01-01T00:00:00 on that clock, i.e.
// the instant plus the zone's offset at that instant: wall(i) = i + off(i).
// Wall times are handled as time.Time values in UTC, where calendar
// arithmetic has no gaps and no repeats.
//
// The rule: the tick of a matching wall time W is the first instant at which
// the zone's clock reads W or later,
//
//	instant(W) = min{ i : wall(i) >= W }.
//
// wall is increasing inside a zone period and jumps at each transition: up
// over a gap (spring forward), back over an overlap (fall back). So for a W
// that exists once, instant(W) is its only instant; for a W inside a gap,
// it is the transition instant, the first valid instant after the gap; for
// a W inside an overlap, it is its first occurrence. instant is
// non-decreasing in W, which is what lets Next and Prev search wall times.

// offsetWindow bounds how far apart an instant and its wall time can be, with
// a wide margin: real UTC offsets stay within -12h..+15h (local mean times
// included), so a wall time W is read between W-48h and W+48h.
const offsetWindow = 48 * 60 * 60

// maxPeriodWalk bounds the steps of one walk over the zone's periods. No
// zone changes its offset anywhere near this often within the 96 hours a
// walk covers; the bound only makes the loops finite.
const maxPeriodWalk = 64

// boundsStep is how far a walk moves when time.Time.ZoneBounds reports an
// end that is not after the instant asked about. Go derives the bounds of
// instants past a zone's last listed transition from its POSIX rule, and
// there they are "accurate close to a daylight savings transition, but
// otherwise just the start and end of the year", a day short in leap years.
// Such an approximate boundary lies far from any transition, so stepping a
// day from it skips none.
const boundsStep = 24 * 60 * 60

func offsetAt(i int64, loc *time.Location) int64 {
	_, off := time.Unix(i, 0).In(loc).Zone()
	return int64(off)
}

// wallOf returns the wall time the zone's clock reads at instant i, as Unix
// seconds on the wall-clock time line.
func wallOf(i int64, loc *time.Location) int64 { return i + offsetAt(i, loc) }

// changeAfter returns the first instant after i at which the zone's offset
// differs from its offset at i, or false when there is none before limit.
// ZoneBounds proposes where the current period ends; the offsets decide, so
// boundaries where only a zone's name changes, and Go's approximate ones,
// are walked past.
func changeAfter(i, limit int64, loc *time.Location) (int64, bool) {
	off := offsetAt(i, loc)
	j := i
	for n := 0; n < maxPeriodWalk && j < limit; n++ {
		_, end := time.Unix(j, 0).In(loc).ZoneBounds()
		if end.IsZero() {
			return 0, false
		}
		e := end.Unix()
		if e <= j {
			e = j + boundsStep
		}
		if offsetAt(e, loc) == off {
			j = e
			continue
		}
		if offsetAt(e-1, loc) == off {
			return e, true // the usual case: ZoneBounds named the change
		}
		lo, hi := j, e // offset(lo) == off != offset(hi): bisect
		for hi-lo > 1 {
			if mid := lo + (hi-lo)/2; offsetAt(mid, loc) == off {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi, true
	}
	return 0, false
}

// instantOf returns min{ i : wall(i) >= w }: the tick of wall time w under the
// DST rule. It walks the runs of constant offset forward from well before
// w; inside a run of offset off starting at start, the first instant whose
// wall time reaches w is max(start, w-off), if the run lasts that long.
func instantOf(w int64, loc *time.Location) int64 {
	i := w - offsetWindow
	for range maxPeriodWalk {
		cand := max(w-offsetAt(i, loc), i)
		end, ok := changeAfter(i, w+offsetWindow, loc)
		if !ok || cand < end {
			return cand
		}
		i = end
	}
	return i // unreachable for real zones; see maxPeriodWalk
}

// maxWallThrough returns the latest wall time the zone's clock has read at or
// before instant a: wall(a), or more when a lies in the second pass of an
// overlap (the clock read later wall times just before it fell back). Every
// wall time up to it has its tick at or before a; every later one after a.
// Runs of constant offset that ended more than offsetWindow before a read
// wall times below wall(a), so only the later ones are visited.
func maxWallThrough(a int64, loc *time.Location) int64 {
	m := wallOf(a, loc)
	i := a - offsetWindow
	for range maxPeriodWalk {
		end, ok := changeAfter(i, a+1, loc)
		if !ok || end > a {
			break
		}
		m = max(m, wallOf(end-1, loc)) // the last second of a run
		i = end
	}
	return m
}

// civil turns a wall time in Unix seconds into a UTC time.Time for calendar
// arithmetic, and back.
func civil(w int64) time.Time { return time.Unix(w, 0).UTC() }

func wallSeconds(c time.Time) int64 { return c.Unix() }
