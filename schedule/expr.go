package schedule

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zones load on machines without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// MaxExprBytes caps a cron expression; a longer one is refused unparsed.
const MaxExprBytes = 256

// MaxZoneBytes caps a zone name (the longest IANA names are about 30 bytes).
const MaxZoneBytes = 64

// cronParser reads 5-field (minute hour dom month dow) and 6-field (second
// first) expressions and the @yearly, @monthly, @weekly, @daily, @midnight
// and @hourly descriptors. Only its field parsing is used: it is stateless,
// and Next is computed here, under this package's DST rule.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour |
	cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// satisfiableFrom is where Parse looks for a first match: every satisfiable
// expression matches within searchYears of any wall time.
var satisfiableFrom = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Expr is a parsed cron expression bound to an IANA zone. Its ticks are
// instants, computed on the zone's wall clock under the package's DST rule
// (see the package documentation): a wall time inside a spring-forward gap
// ticks once, at the first instant after the gap; a wall time repeated by a
// fall-back ticks once, at its first occurrence; several wall times that map
// to one instant make one tick. An Expr is immutable and safe for concurrent
// use; its methods read no clock.
type Expr struct {
	src  string
	zone string
	loc  *time.Location
	f    fields
}

// Parse parses expr, a cron expression, to be read on the wall clock of zone,
// an IANA zone name ("Europe/Berlin", "UTC"). Accepted: 5 fields (minute
// hour day-of-month month day-of-week), 6 fields (a seconds field first),
// names (JAN, MON) and the descriptors @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly, as robfig/cron/v3 parses them; a
// 5-field expression ticks at second 0.
//
// Refused with a *ParseError: an empty, oversized or malformed expression;
// "@every" (an interval, not a wall-clock schedule); a "TZ=" or "CRON_TZ="
// prefix (the zone is the zone argument, never part of the expression); an
// expression that matches no date (February 30th); an empty zone, "Local"
// (which depends on the machine) and a zone the embedded tz database does
// not know.
func Parse(expr, zone string) (*Expr, error) {
	loc, err := loadZone(expr, zone)
	if err != nil {
		return nil, err
	}
	f, err := parseFields(expr)
	if err != nil {
		return nil, &ParseError{Expr: expr, Zone: zone, Reason: err.Error()}
	}
	if _, ok := f.nextMatch(satisfiableFrom); !ok {
		return nil, &ParseError{Expr: expr, Zone: zone, Reason: "matches no date"}
	}
	return &Expr{src: expr, zone: zone, loc: loc, f: f}, nil
}

// loadZone resolves an IANA zone name from the embedded tz database (or the
// system one when present).
func loadZone(expr, zone string) (*time.Location, error) {
	refuse := func(reason string) error { return &ParseError{Expr: expr, Zone: zone, Reason: reason} }
	switch {
	case zone == "":
		return nil, refuse(`zone is required ("UTC" for UTC)`)
	case zone == "Local":
		return nil, refuse(`"Local" depends on the machine; name an IANA zone`)
	case len(zone) > MaxZoneBytes:
		return nil, refuse(fmt.Sprintf("zone longer than %d bytes", MaxZoneBytes))
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, refuse("unknown time zone")
	}
	return loc, nil
}

// parseFields runs robfig/cron/v3's parser behind this package's refusals,
// and turns a panic of the parser into an error: an expression is outside
// input.
func parseFields(expr string) (f fields, err error) {
	s := strings.TrimSpace(expr)
	switch {
	case s == "":
		return f, fmt.Errorf("empty expression")
	case len(expr) > MaxExprBytes:
		return f, fmt.Errorf("longer than %d bytes", MaxExprBytes)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return f, fmt.Errorf("a TZ= prefix is not accepted; the zone is given apart")
	case strings.HasPrefix(s, "@every"):
		return f, fmt.Errorf("@every is an interval, not a wall-clock schedule")
	}
	defer func() {
		if r := recover(); r != nil {
			f, err = fields{}, fmt.Errorf("unparsable expression")
		}
	}()
	sched, err := cronParser.Parse(s)
	if err != nil {
		return f, err
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return f, fmt.Errorf("not a field-based schedule")
	}
	return fields{second: spec.Second, minute: spec.Minute, hour: spec.Hour,
		dom: spec.Dom, month: spec.Month, dow: spec.Dow}, nil
}

// String returns the expression as given to Parse.
func (e *Expr) String() string { return e.src }

// Zone returns the IANA zone name the expression is read in.
func (e *Expr) Zone() string { return e.zone }

// Location returns the zone the expression is read in.
func (e *Expr) Location() *time.Location { return e.loc }

// Next returns the first tick strictly after after, in the expression's
// zone, at a whole second. It would return the zero Time if no tick fell
// within 12 years; Parse refuses every expression for which that can happen.
func (e *Expr) Next(after time.Time) time.Time {
	// Every wall time up to the latest one the clock has read by after
	// ticks at or before after; the first match past it is the answer.
	w := maxWallThrough(after.Unix(), e.loc) + 1
	c, ok := e.f.nextMatch(civil(w))
	if !ok {
		return time.Time{}
	}
	return time.Unix(instantOf(wallSeconds(c), e.loc), 0).In(e.loc)
}

// Prev returns the last tick strictly before before, in the expression's
// zone; the zero Time when none falls within the 12 years before it.
func (e *Expr) Prev(before time.Time) time.Time {
	last := before.Unix() // the last whole second before before
	if before.Nanosecond() == 0 {
		last--
	}
	c, ok := e.f.prevMatch(civil(maxWallThrough(last, e.loc)))
	if !ok {
		return time.Time{}
	}
	return time.Unix(instantOf(wallSeconds(c), e.loc), 0).In(e.loc)
}

// Ticks returns the ticks t with after < t <= until, oldest first. When
// there are more than max of them it returns the max most recent ones: a
// catch-up replays the latest ticks, and its cost is bounded by max, not
// by how long the schedule was down. It returns nil when max < 1 or until
// is not after after.
func (e *Expr) Ticks(after, until time.Time, max int) []time.Time {
	if max < 1 || !until.After(after) {
		return nil
	}
	var out []time.Time
	for cur := until.Add(time.Nanosecond); len(out) < max; {
		t := e.Prev(cur)
		if t.IsZero() || !t.After(after) {
			break
		}
		out = append(out, t)
		cur = t
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// countTicks counts the ticks t with after < t < before, stopping at limit;
// capped reports that it stopped there.
func (e *Expr) countTicks(after, before time.Time, limit int) (n int, capped bool) {
	for t := e.Next(after); !t.IsZero() && t.Before(before); t = e.Next(t) {
		if n == limit {
			return n, true
		}
		n++
	}
	return n, false
}
