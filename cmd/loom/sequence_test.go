package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestSequenceFlagsCannotOverflow gives state and diff sequences at the top
// of int64: past the end of the log, they are refused (exit 4) naming the
// log's real end — the read's at+1 used to wrap to a negative bound, so
// --at 9223372036854775807 reported the nearest snapshot as the end of the
// log. Negative sequences are usage errors; logs --from the top is empty.
func TestSequenceFlagsCannotOverflow(t *testing.T) {
	_, fx := setup(t)
	last := len(readLog(t, fx.path, "order-1")) - 1
	ends := fmt.Sprintf("its log ends at #%d ", last)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"state", "order-1", "--at", "9223372036854775807"}, exitNotFound, "order-1 has no event #9223372036854775807: " + ends},
		{[]string{"state", "order-1", "--at", "9223372036854775806"}, exitNotFound, "order-1 has no event #9223372036854775806: " + ends},
		{[]string{"state", "order-1", "--at", fmt.Sprint(last + 1)}, exitNotFound, fmt.Sprintf("order-1 has no event #%d: %s", last+1, ends)},
		{[]string{"state", "order-1", "--json", "--at", "9223372036854775807"}, exitNotFound, ends},
		{[]string{"state", "order-1", "--at", "-1"}, exitUsage, "--at must be 0 or more"},
		{[]string{"state", "order-1", "--at", "-9223372036854775808"}, exitUsage, "--at must be 0 or more"},
		{[]string{"state", "order-1", "--at", "9223372036854775808"}, exitUsage, "invalid argument"},
		{[]string{"diff", "order-1", "--from", "0", "--to", "9223372036854775807"}, exitNotFound, "order-1 has no event #9223372036854775807: " + ends},
		{[]string{"diff", "order-1", "--from", "9223372036854775807"}, exitNotFound, "order-1 has no event #9223372036854775807: " + ends},
		{[]string{"diff", "order-1", "--from", "-1"}, exitUsage, "--from and --to must be 0 or more"},
		{[]string{"logs", "order-1", "--from", "9223372036854775807"}, exitOK, "No events from #9223372036854775807 on."},
		{[]string{"logs", "order-1", "--from", "-5"}, exitUsage, "--from must be 0 or more"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(tc.args, "--store", fx.path), &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.says) {
			t.Errorf("loom %v: exit %d, stderr %q (stdout %q); want exit %d saying %q", tc.args, code, errOut.String(), out.String(), tc.code, tc.says)
		}
	}
	// The fixture's snapshots (every 3 events, and at parks) end before the
	// logs of these executions do: the overflowed read stopped at them.
	for _, id := range []string{"order-1", "order-3", "refund-1", "order-1-what-if"} {
		want := fmt.Sprintf("%s has no event #9223372036854775807: its log ends at #%d ", id, len(readLog(t, fx.path, id))-1)
		for _, args := range [][]string{{"state", id, "--at", "9223372036854775807"}, {"diff", id, "--from", "1", "--to", "9223372036854775807"}} {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(args, "--store", fx.path), &out, &errOut)
			if code != exitNotFound || !strings.Contains(errOut.String(), want) {
				t.Errorf("loom %v: exit %d, stderr %q; want exit 4 saying %q", args, code, errOut.String(), want)
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"state", "order-1", "--store", fx.path, "--json", "--at", fmt.Sprint(last)}, &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), fmt.Sprintf(`"sequence":%d`, last)) {
		t.Fatalf("state at the last sequence: exit %d %s %s", code, out.String(), errOut.String())
	}
}
