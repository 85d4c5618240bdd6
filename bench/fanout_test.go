package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestFanOutReportsEveryField runs workload g in-process on SQLite at tiny
// sizes and checks its report: every field there, and the counts the
// runtime fixes. It checks no timing. The workload itself fails the run
// should a child or a parent end with another output, or the runtime log
// a warning.
func TestFanOutReportsEveryField(t *testing.T) {
	doc := runHarness(t, "-workloads", "g", "-duration", "200ms", "-db-dir", t.TempDir(),
		"-fanout-small", "5", "-fanout-large", "20", "-fanout-reps", "2")
	checkFanOutReport(t, doc, 5, 20, 2)
	workloads := lookup(t, doc, "workloads").(map[string]any)
	for _, w := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, ok := workloads[w]; ok {
			t.Errorf("workloads.%s reported, but not selected", w)
		}
	}
}

// TestFanOutOnPostgres runs workload g on PostgreSQL at tiny sizes, checks
// the report as on SQLite, and that its schemas were created and dropped.
func TestFanOutOnPostgres(t *testing.T) {
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		t.Fatalf("%s is not set: the bench PostgreSQL tests need a PostgreSQL server and never skip. "+
			"Run ./scripts/test.sh, or eval \"$(./scripts/pg-start.sh)\" first", dsnEnv)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := benchSchemas(t, conn)

	doc := runHarness(t, "-postgres", dsn, "-workloads", "g", "-duration", "200ms",
		"-fanout-small", "5", "-fanout-large", "20", "-fanout-reps", "1")
	if s := lookup(t, doc, "config.store"); s != "postgres" {
		t.Errorf("config.store = %v, want postgres", s)
	}
	checkFanOutReport(t, doc, 5, 20, 1)
	schemas, _ := lookup(t, doc, "config.postgres.schemas").([]any)
	var names []string
	for _, s := range schemas {
		name, _ := s.(string)
		names = append(names, name)
	}
	if len(names) != 3 || !strings.HasSuffix(names[1], "_g5") || !strings.HasSuffix(names[2], "_g20") {
		t.Errorf("config.postgres.schemas = %v, want raw, g5 and g20", names)
	}
	after := benchSchemas(t, conn)
	for s := range after {
		if !before[s] {
			t.Errorf("schema %s left behind", s)
		}
	}
}

// checkFanOutReport checks workload g's report for fan-outs of small and
// large children measured reps times.
func checkFanOutReport(t *testing.T, doc map[string]any, small, large, reps int) {
	t.Helper()
	num := func(path string) float64 { t.Helper(); return number(t, doc, path) }
	g := "workloads.g."
	for _, path := range []string{"description", "durability", "comparison"} {
		if s, ok := lookup(t, doc, g+path).(string); !ok || s == "" {
			t.Errorf("%s%s = %v, want a non-empty string", g, path, lookup(t, doc, g+path))
		}
	}
	if d := lookup(t, doc, g+"durability"); d != "WriteBehind" {
		t.Errorf("%sdurability = %v, want WriteBehind", g, d)
	}
	if _, ok := lookup(t, doc, g+"met").(bool); !ok {
		t.Errorf("%smet = %v, want a bool", g, lookup(t, doc, g+"met"))
	}
	for _, path := range []string{"ratio", "linearity.startsMsPerChild", "linearity.fanOutMsPerChild"} {
		if num(g+path) <= 0 {
			t.Errorf("%s%s = %v, want a positive number", g, path, num(g+path))
		}
	}
	if r, s, l := num(g+"ratio"), num(g+"small.ratio"), num(g+"large.ratio"); r != max(s, l) {
		t.Errorf("%sratio = %v, want the worse size's (%v, %v)", g, r, s, l)
	}
	exact := map[string]float64{g + "repetitions": float64(reps), g + "warmup": 10, g + "target": 1.5}
	for size, n := range map[string]int{"small": small, "large": large} {
		p := g + size + "."
		exact[p+"children"] = float64(n)
		// Each start: EXECUTION_STARTED, then the step's two events and
		// EXECUTION_COMPLETED. The fan-out adds the parent's per child:
		// the spawn step's two events, the await's park and answer.
		exact[p+"startsEventsPerChild"] = 4
		exact[p+"fanOutEventsPerChild"] = 8 + 2/float64(n)
		for _, f := range []string{"startsMs", "fanOutMs", "startsMsPerChild", "fanOutMsPerChild", "ratio",
			"startsAppendsPerChild", "fanOutAppendsPerChild", "startsTransactionsPerChild", "fanOutTransactionsPerChild"} {
			if num(p+f) <= 0 {
				t.Errorf("%s%s = %v, want a positive number", p, f, num(p+f))
			}
		}
		for _, f := range []string{"startsSamplesMs", "fanOutSamplesMs"} {
			if l, ok := lookup(t, doc, p+f).([]any); !ok || len(l) != reps {
				t.Errorf("%s%s = %v, want %d samples", p, f, lookup(t, doc, p+f), reps)
			}
		}
	}
	for path, want := range exact {
		if got := num(path); got != round(want) {
			t.Errorf("%s = %v, want %v", path, got, round(want))
		}
	}
}

// TestFanOutFlags checks workload g's flags: refused out of their limits,
// and g run only when named.
func TestFanOutFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-fanout-small", "0"},
		{"-fanout-small", "100", "-fanout-large", "100"},
		{"-fanout-large", "10001"},
		{"-fanout-reps", "0"},
		{"-fanout-reps", "101"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	f, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "a,b,c,d,e" || f.fanSmall != 100 || f.fanLarge != 1000 || f.fanReps != 5 {
		t.Errorf("defaults: workloads %v, fan-out %d/%d × %d; want a,b,c,d,e and 100/1000 × 5", f.workloads, f.fanSmall, f.fanLarge, f.fanReps)
	}
	if f, err = parseFlags([]string{"-postgres", "postgres://x", "-workloads", "g,a", "-fanout-reps", "1"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "a,g" || f.fanReps != 1 {
		t.Errorf("-postgres -workloads g,a: workloads %v, reps %d; want a,g and 1", f.workloads, f.fanReps)
	}
}
