package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse feeds Parse outside input: it never panics, refuses only with a
// *ParseError, and what it accepts has a next tick strictly after any
// instant.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ expr, zone string }{
		{"* * * * *", "UTC"}, {"*/15 2 * * *", "America/New_York"}, {"30 30 2 * * *", "Australia/Lord_Howe"},
		{"@hourly", "Europe/Berlin"}, {"@every 1h", "UTC"}, {"TZ=UTC", "UTC"}, {"CRON_TZ=", "UTC"},
		{"0 0 30 2 *", "UTC"}, {"1-2/3,4 * ? JAN-MAR SUN", "Asia/Kolkata"}, {"*/0 * * * *", "UTC"},
		{"- * * * *", "UTC"}, {"/ * * * *", "UTC"}, {"* * * * *", "Local"}, {"0 0 29 2 *", "Pacific/Apia"},
	} {
		f.Add(seed.expr, seed.zone, int64(1_710_054_000))
	}
	f.Fuzz(func(t *testing.T, expr, zone string, sec int64) {
		e, err := Parse(expr, zone)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Reason == "" {
				t.Fatalf("Parse(%q, %q) = %v, want a *ParseError", expr, zone, err)
			}
			return
		}
		at := time.Unix(sec%(1<<34), 0) // within years 1426..2514
		if n := e.Next(at); !n.After(at) {
			t.Fatalf("Parse(%q, %q).Next(%v) = %v", expr, zone, at, n)
		}
	})
}
