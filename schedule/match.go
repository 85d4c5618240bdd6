package schedule

import (
	"math/bits"
	"time"
)

// fields are a cron expression's matching sets as robfig/cron/v3 parses
// them: bit n of a set is on when value n matches. starBit marks a day field
// written as "*" or "?", which changes how the two day fields combine.
type fields struct {
	second, minute, hour, dom, month, dow uint64
}

// starBit is robfig/cron/v3's marker for a field written "*" or "?".
const starBit = 1 << 63

// searchYears bounds a search for the next or previous matching wall time.
// The rarest satisfiable day is February 29th, eight years apart at worst
// (2096 to 2104); Parse refuses an expression with no match in such a span,
// so every search of a parsed expression succeeds well inside this bound.
const searchYears = 12

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

// nextIn returns the smallest value >= v in set, or -1 when there is none.
func nextIn(set uint64, v int) int {
	m := (set &^ starBit) >> uint(v) << uint(v)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// prevIn returns the largest value <= v in set, or -1 when there is none.
func prevIn(set uint64, v int) int {
	m := (set &^ starBit) & (1<<uint(v+1) - 1)
	if m == 0 {
		return -1
	}
	return 63 - bits.LeadingZeros64(m)
}

// dayMatches combines day-of-month and day-of-week the way cron (and
// robfig/cron/v3) does: when either is "*" both must match, otherwise
// either may.
func (f *fields) dayMatches(c time.Time) bool {
	domMatch := has(f.dom, c.Day())
	dowMatch := has(f.dow, int(c.Weekday()))
	if f.dom&starBit != 0 || f.dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

// nextMatch returns the first matching wall time at or after c (a whole
// second, UTC-represented), or false when there is none within searchYears.
// Each step jumps to the start of the next month or day, or straight to the
// next matching hour, minute or second, and then checks everything again,
// so a search costs a few dozen steps at most between matching days.
func (f *fields) nextMatch(c time.Time) (time.Time, bool) {
	limit := c.AddDate(searchYears, 0, 0)
	for t := c; !t.After(limit); {
		y, m, d := t.Date()
		h, mi, s := t.Clock()
		switch {
		case !has(f.month, int(m)):
			t = time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
		case !f.dayMatches(t):
			t = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
		case !has(f.hour, h):
			if n := nextIn(f.hour, h); n >= 0 {
				t = time.Date(y, m, d, n, 0, 0, 0, time.UTC)
			} else {
				t = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
			}
		case !has(f.minute, mi):
			if n := nextIn(f.minute, mi); n >= 0 {
				t = time.Date(y, m, d, h, n, 0, 0, time.UTC)
			} else {
				t = time.Date(y, m, d, h+1, 0, 0, 0, time.UTC)
			}
		case !has(f.second, s):
			if n := nextIn(f.second, s); n >= 0 {
				t = time.Date(y, m, d, h, mi, n, 0, time.UTC)
			} else {
				t = time.Date(y, m, d, h, mi+1, 0, 0, time.UTC)
			}
		default:
			return t, true
		}
	}
	return time.Time{}, false
}

// prevMatch returns the last matching wall time at or before c, or false
// when there is none within searchYears; the mirror of nextMatch, jumping
// back to the last second of the previous month or day, or straight to the
// previous matching hour, minute or second.
func (f *fields) prevMatch(c time.Time) (time.Time, bool) {
	limit := c.AddDate(-searchYears, 0, 0)
	for t := c; !t.Before(limit); {
		y, m, d := t.Date()
		h, mi, s := t.Clock()
		switch {
		case !has(f.month, int(m)):
			t = time.Date(y, m, 0, 23, 59, 59, 0, time.UTC) // day 0: the month before's last
		case !f.dayMatches(t):
			t = time.Date(y, m, d-1, 23, 59, 59, 0, time.UTC)
		case !has(f.hour, h):
			if p := prevIn(f.hour, h); p >= 0 {
				t = time.Date(y, m, d, p, 59, 59, 0, time.UTC)
			} else {
				t = time.Date(y, m, d-1, 23, 59, 59, 0, time.UTC)
			}
		case !has(f.minute, mi):
			if p := prevIn(f.minute, mi); p >= 0 {
				t = time.Date(y, m, d, h, p, 59, 0, time.UTC)
			} else {
				t = time.Date(y, m, d, h-1, 59, 59, 0, time.UTC)
			}
		case !has(f.second, s):
			if p := prevIn(f.second, s); p >= 0 {
				t = time.Date(y, m, d, h, mi, p, 0, time.UTC)
			} else {
				t = time.Date(y, m, d, h, mi-1, 59, 0, time.UTC)
			}
		default:
			return t, true
		}
	}
	return time.Time{}, false
}
