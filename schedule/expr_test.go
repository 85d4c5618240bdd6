package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func mustParse(t tb, expr, zone string) *Expr {
	t.Helper()
	e, err := Parse(expr, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, zone, err)
	}
	return e
}

func utc(t tb, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// dstCases pin the DST rule: each lists the ticks that follow after, as UTC
// instants; the comment gives the zone's wall clock. 2024 transitions:
// America/New_York gap 02:00-03:00 on 03-10 (07:00Z), overlap 01:00-02:00 on
// 11-03 (06:00Z); Europe/Berlin gap 02:00-03:00 on 03-31 (01:00Z), overlap
// 02:00-03:00 on 10-27 (01:00Z); Australia/Lord_Howe (30-minute shift)
// overlap 01:30-02:00 on 04-07 (04-06 15:00Z), gap 02:00-02:30 on 10-06
// (10-05 15:30Z); Pacific/Apia skipped all of 2011-12-30.
var dstCases = []struct {
	name, expr, zone, after string
	want                    []string
}{
	{"NY gap daily 02:30 fires at 03:00 EDT", "30 2 * * *", "America/New_York", "2024-03-09T00:00:00Z",
		// 02:30 EST, 03:00 EDT (02:30 does not exist), 02:30 EDT
		[]string{"2024-03-09T07:30:00Z", "2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"}},
	{"NY gap every minute", "* * * * *", "America/New_York", "2024-03-10T06:57:30Z",
		// 01:58 EST, 01:59 EST, 03:00 EDT (02:00-02:59 and 03:00: one tick), 03:01 EDT
		[]string{"2024-03-10T06:58:00Z", "2024-03-10T06:59:00Z", "2024-03-10T07:00:00Z", "2024-03-10T07:01:00Z"}},
	{"NY gap every 15 minutes", "*/15 * * * *", "America/New_York", "2024-03-10T06:20:00Z",
		// 01:30 EST, 01:45 EST, 03:00 EDT (for 02:00, 02:15, 02:30, 02:45, 03:00), 03:15 EDT
		[]string{"2024-03-10T06:30:00Z", "2024-03-10T06:45:00Z", "2024-03-10T07:00:00Z", "2024-03-10T07:15:00Z"}},
	{"NY gap 02:00 and 03:00 make one tick", "0 2,3 * * *", "America/New_York", "2024-03-09T12:00:00Z",
		// 03:00 EDT once, then 02:00 EDT and 03:00 EDT on 03-11
		[]string{"2024-03-10T07:00:00Z", "2024-03-11T06:00:00Z", "2024-03-11T07:00:00Z"}},
	{"NY overlap daily 01:30 fires once, first occurrence", "30 1 * * *", "America/New_York", "2024-11-02T00:00:00Z",
		// 01:30 EDT, 01:30 EDT (not 01:30 EST), 01:30 EST
		[]string{"2024-11-02T05:30:00Z", "2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"}},
	{"NY overlap every minute", "* * * * *", "America/New_York", "2024-11-03T05:57:30Z",
		// 01:58 EDT, 01:59 EDT, then 02:00 EST: the repeated 01:xx EST fire nothing
		[]string{"2024-11-03T05:58:00Z", "2024-11-03T05:59:00Z", "2024-11-03T07:00:00Z", "2024-11-03T07:01:00Z"}},
	{"NY overlap every 15 minutes", "*/15 * * * *", "America/New_York", "2024-11-03T04:40:00Z",
		// 00:45 EDT, 01:00-01:45 EDT, 02:00 EST, 02:15 EST
		[]string{"2024-11-03T04:45:00Z", "2024-11-03T05:00:00Z", "2024-11-03T05:15:00Z", "2024-11-03T05:30:00Z",
			"2024-11-03T05:45:00Z", "2024-11-03T07:00:00Z", "2024-11-03T07:15:00Z"}},
	{"NY overlap from inside the repeated pass", "*/15 * * * *", "America/New_York", "2024-11-03T06:10:00Z",
		// after 01:10 EST (second pass): next is 02:00 EST
		[]string{"2024-11-03T07:00:00Z", "2024-11-03T07:15:00Z"}},
	{"NY overlap hourly descriptor", "@hourly", "America/New_York", "2024-11-03T04:30:00Z",
		// 01:00 EDT, 02:00 EST (01:00 EST is the repeat), 03:00 EST
		[]string{"2024-11-03T05:00:00Z", "2024-11-03T07:00:00Z", "2024-11-03T08:00:00Z"}},
	{"Berlin gap daily 02:30", "30 2 * * *", "Europe/Berlin", "2024-03-30T00:00:00Z",
		// 02:30 CET, 03:00 CEST, 02:30 CEST
		[]string{"2024-03-30T01:30:00Z", "2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"}},
	{"Berlin gap every 15 minutes", "*/15 * * * *", "Europe/Berlin", "2024-03-31T00:20:00Z",
		// 01:30 CET, 01:45 CET, 03:00 CEST, 03:15 CEST
		[]string{"2024-03-31T00:30:00Z", "2024-03-31T00:45:00Z", "2024-03-31T01:00:00Z", "2024-03-31T01:15:00Z"}},
	{"Berlin midnight unaffected", "@daily", "Europe/Berlin", "2024-03-30T12:00:00Z",
		// 00:00 CET, 00:00 CEST
		[]string{"2024-03-30T23:00:00Z", "2024-03-31T22:00:00Z"}},
	{"Berlin overlap daily 02:30", "30 2 * * *", "Europe/Berlin", "2024-10-26T00:00:00Z",
		// 02:30 CEST, 02:30 CEST (first occurrence), 02:30 CET
		[]string{"2024-10-26T00:30:00Z", "2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"}},
	{"Berlin overlap every minute", "* * * * *", "Europe/Berlin", "2024-10-27T00:58:30Z",
		// 02:59 CEST, then 03:00 CET
		[]string{"2024-10-27T00:59:00Z", "2024-10-27T02:00:00Z", "2024-10-27T02:01:00Z"}},
	{"Lord Howe overlap every 15 minutes", "*/15 * * * *", "Australia/Lord_Howe", "2024-04-06T14:05:00Z",
		// 01:15, 01:30, 01:45 +11, then 02:00 +1030 (01:30 and 01:45 +1030 repeat)
		[]string{"2024-04-06T14:15:00Z", "2024-04-06T14:30:00Z", "2024-04-06T14:45:00Z", "2024-04-06T15:30:00Z"}},
	{"Lord Howe overlap daily 01:45", "45 1 * * *", "Australia/Lord_Howe", "2024-04-06T00:00:00Z",
		// 01:45 +11 (first occurrence), 01:45 +1030
		[]string{"2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"}},
	{"Lord Howe gap every 15 minutes", "*/15 * * * *", "Australia/Lord_Howe", "2024-10-05T14:50:00Z",
		// 01:30, 01:45 +1030, 02:30 +11 (for 02:00, 02:15, 02:30), 02:45 +11
		[]string{"2024-10-05T15:00:00Z", "2024-10-05T15:15:00Z", "2024-10-05T15:30:00Z", "2024-10-05T15:45:00Z"}},
	{"Lord Howe gap daily 02:15", "15 2 * * *", "Australia/Lord_Howe", "2024-10-04T00:00:00Z",
		// 02:15 +1030, 02:30 +11 (02:15 does not exist), 02:15 +11
		[]string{"2024-10-04T15:45:00Z", "2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"}},
	{"Apia skipped day fires at the next valid instant", "0 9 * * *", "Pacific/Apia", "2011-12-29T00:00:00Z",
		// 12-29 09:00 -10, 12-31 00:00 +14 (12-30 never happened), 12-31 09:00 +14
		[]string{"2011-12-29T19:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T19:00:00Z"}},
	{"UTC every 15 minutes", "*/15 * * * *", "UTC", "2024-03-31T00:50:00Z",
		[]string{"2024-03-31T01:00:00Z", "2024-03-31T01:15:00Z"}},
	{"UTC leap day", "0 0 29 2 *", "UTC", "2024-03-01T00:00:00Z",
		[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
	{"UTC leap day across 2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z",
		[]string{"2104-02-29T00:00:00Z"}},
	{"6 fields every 20 seconds across NY gap", "*/20 * * * * *", "America/New_York", "2024-03-10T06:59:30Z",
		// 01:59:40 EST, 03:00:00 EDT (02:00:00 .. 02:59:40 and 03:00:00), 03:00:20 EDT
		[]string{"2024-03-10T06:59:40Z", "2024-03-10T07:00:00Z", "2024-03-10T07:00:20Z"}},
	{"6 fields 02:30:30 in NY gap", "30 30 2 * * *", "America/New_York", "2024-03-10T00:00:00Z",
		[]string{"2024-03-10T07:00:00Z", "2024-03-11T06:30:30Z"}},
	{"6 fields 01:30:15 in NY overlap", "15 30 1 * * *", "America/New_York", "2024-11-03T00:00:00Z",
		[]string{"2024-11-03T05:30:15Z", "2024-11-04T06:30:15Z"}},
}

// TestNextDSTRule checks Next against every case, and Prev walking the same
// ticks back.
func TestNextDSTRule(t *testing.T) {
	for _, tc := range dstCases {
		t.Run(tc.name, func(t *testing.T) {
			e := mustParse(t, tc.expr, tc.zone)
			at := utc(t, tc.after)
			for i, w := range tc.want {
				got := e.Next(at)
				if !got.Equal(utc(t, w)) {
					t.Fatalf("tick %d after %s: got %s (%s), want %s", i, at.UTC().Format(time.RFC3339),
						got.UTC().Format(time.RFC3339), got.Format("15:04:05 MST"), w)
				}
				if got.Location() != e.Location() {
					t.Errorf("tick %d in %v, want %v", i, got.Location(), e.Location())
				}
				if i > 0 {
					if prev := e.Prev(got); !prev.Equal(utc(t, tc.want[i-1])) {
						t.Errorf("Prev(%s) = %s, want %s", w, prev.UTC().Format(time.RFC3339), tc.want[i-1])
					}
				}
				at = got
			}
		})
	}
}

func TestNextIsStrictlyAfterSubSecond(t *testing.T) {
	e := mustParse(t, "* * * * * *", "UTC")
	at := utc(t, "2024-01-01T00:00:00Z")
	if got := e.Next(at); !got.Equal(at.Add(time.Second)) {
		t.Errorf("Next(whole second) = %v", got)
	}
	if got := e.Next(at.Add(time.Millisecond)); !got.Equal(at.Add(time.Second)) {
		t.Errorf("Next(+1ms) = %v", got)
	}
	if got := e.Prev(at.Add(time.Millisecond)); !got.Equal(at) {
		t.Errorf("Prev(+1ms) = %v, want %v", got, at)
	}
	if got := e.Prev(at); !got.Equal(at.Add(-time.Second)) {
		t.Errorf("Prev(whole second) = %v", got)
	}
}

func TestTicksKeepsTheLatestOldestFirst(t *testing.T) {
	e := mustParse(t, "*/15 * * * *", "America/New_York")
	after, until := utc(t, "2024-03-10T06:00:00Z"), utc(t, "2024-03-10T07:15:00Z")
	all := []string{"2024-03-10T06:15:00Z", "2024-03-10T06:30:00Z", "2024-03-10T06:45:00Z",
		"2024-03-10T07:00:00Z", "2024-03-10T07:15:00Z"}
	for _, tc := range []struct {
		max  int
		want []string
	}{{10, all}, {5, all}, {2, all[3:]}, {1, all[4:]}, {0, nil}, {-1, nil}} {
		got := e.Ticks(after, until, tc.max)
		if len(got) != len(tc.want) {
			t.Fatalf("max %d: got %d ticks %v, want %v", tc.max, len(got), got, tc.want)
		}
		for i := range got {
			if !got[i].Equal(utc(t, tc.want[i])) {
				t.Errorf("max %d: tick %d = %s, want %s", tc.max, i, got[i].UTC().Format(time.RFC3339), tc.want[i])
			}
		}
	}
	if got := e.Ticks(until, after, 10); got != nil {
		t.Errorf("reversed range: %v", got)
	}
	// after is exclusive, until inclusive.
	if got := e.Ticks(utc(t, all[0]), utc(t, all[1]), 10); len(got) != 1 || !got[0].Equal(utc(t, all[1])) {
		t.Errorf("bounds: %v", got)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, expr := range []string{
		"* * * * *", "0 0 * * *", "*/15 9-17 * * MON-FRI", "0 12 1 JAN,jul *", "0 0 * * ?",
		"30 */5 * * * *", "0 0 0 1 1 *", "  0 0 * * *  ",
		"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
		"0 0 30 2 MON", // day-of-month OR day-of-week: every Monday of February
	} {
		e, err := Parse(expr, "Europe/Berlin")
		if err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
			continue
		}
		if e.String() != expr || e.Zone() != "Europe/Berlin" {
			t.Errorf("Parse(%q) kept %q in %q", expr, e.String(), e.Zone())
		}
	}
	for _, zone := range []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Etc/GMT+5"} {
		if _, err := Parse("0 * * * *", zone); err != nil {
			t.Errorf("zone %q: %v", zone, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ expr, zone, reason string }{
		{"", "UTC", "empty"},
		{"   ", "UTC", "empty"},
		{"* * * *", "UTC", "fields"},
		{"* * * * * * *", "UTC", "fields"},
		{"60 * * * *", "UTC", "above maximum"},
		{"* 24 * * *", "UTC", "above maximum"},
		{"0 0 0 * *", "UTC", "below minimum"},
		{"*/0 * * * *", "UTC", "positive"},
		{"5-1 * * * *", "UTC", "beyond end"},
		{"a b c d e", "UTC", "parse"},
		{"0 0 * * 7", "UTC", "above maximum"},
		{"0 0 30 2 *", "UTC", "matches no date"},
		{"0 0 31 4,6,9,11 *", "UTC", "matches no date"},
		{"@every 1h", "UTC", "interval"},
		{"@reboot", "UTC", "unrecognized"},
		{"TZ=UTC", "UTC", "TZ="},
		{"TZ=UTC * * * * *", "UTC", "TZ="},
		{"CRON_TZ=Europe/Berlin 0 0 * * *", "UTC", "TZ="},
		{strings.Repeat("1,", 200) + "1 * * * *", "UTC", "longer than"},
		{"* * * * *", "", "zone is required"},
		{"* * * * *", "Local", "depends on the machine"},
		{"* * * * *", "Mars/Olympus_Mons", "unknown time zone"},
		{"* * * * *", "../../etc/passwd", "unknown time zone"},
		{"* * * * *", "Europe/Berlin ", "unknown time zone"},
		{"* * * * *", strings.Repeat("A", 100), "longer than"},
	}
	for _, tc := range cases {
		e, err := Parse(tc.expr, tc.zone)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q, %q) = %v, %v; want a *ParseError", tc.expr, tc.zone, e, err)
			continue
		}
		if !errors.Is(err, ErrInvalid) || pe.Expr != tc.expr || pe.Zone != tc.zone {
			t.Errorf("Parse(%q, %q): %#v", tc.expr, tc.zone, pe)
		}
		if !strings.Contains(pe.Reason, tc.reason) {
			t.Errorf("Parse(%q, %q): reason %q, want it to mention %q", tc.expr, tc.zone, pe.Reason, tc.reason)
		}
	}
}
