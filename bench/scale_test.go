package main

import (
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestScaleReportsEveryField runs workload f in-process on SQLite at a tiny
// size and checks its report: every field there and sane, and the counts
// the harness fixes. It checks no timing. The workload itself fails the
// run should recovery re-drive or commit anything, the status index list
// anything but the parked executions, a listing skip or repeat an id, or
// a resumed execution end with another output.
func TestScaleReportsEveryField(t *testing.T) {
	doc := runHarness(t, "-workloads", "f", "-duration", "200ms", "-db-dir", t.TempDir(),
		"-scale-small", "20", "-scale-large", "200")
	if s := lookup(t, doc, "config.store"); s != "sqlite" {
		t.Errorf("config.store = %v, want sqlite", s)
	}
	checkScaleReport(t, doc, 20, 200, true)
}

// TestScaleOnPostgres runs workload f on PostgreSQL at a tiny size, checks
// the report as on SQLite, and that the schemas of both populations were
// created and dropped.
func TestScaleOnPostgres(t *testing.T) {
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

	doc := runHarness(t, "-postgres", dsn, "-workloads", "f", "-duration", "200ms",
		"-scale-small", "20", "-scale-large", "200")
	if s := lookup(t, doc, "config.store"); s != "postgres" {
		t.Errorf("config.store = %v, want postgres", s)
	}
	checkScaleReport(t, doc, 20, 200, false)

	schemas, _ := lookup(t, doc, "config.postgres.schemas").([]any)
	var names []string
	for _, s := range schemas {
		name, _ := s.(string)
		names = append(names, name)
	}
	if len(names) != 3 || !strings.HasSuffix(names[1], "_f20") || !strings.HasSuffix(names[2], "_f200") {
		t.Errorf("config.postgres.schemas = %v, want raw, f20 and f200", names)
	}
	after := benchSchemas(t, conn)
	for s := range after {
		if !before[s] {
			t.Errorf("schema %s left behind", s)
		}
	}
}

// checkScaleReport checks workload f's report for populations of small
// and large executions.
func checkScaleReport(t *testing.T, doc map[string]any, small, large int, onSQLite bool) {
	t.Helper()
	num := func(path string) float64 { t.Helper(); return number(t, doc, path) }
	f := "workloads.f."
	for _, path := range []string{"ratio", "target", "resumeP50Ratio", "resumeP99Ratio", "rssRatio", "heapInuseRatio",
		"recoveryRatio", "buildWorkers", "stickyParks", "resumes", "resumeWarmups", "seed"} {
		if num(f+path) <= 0 {
			t.Errorf("%s%s = %v, want a positive number", f, path, num(f+path))
		}
	}
	if runtime.GOOS != "linux" {
		t.Logf("no /proc/self/status on %s: RSS fields are 0", runtime.GOOS)
	}
	for _, path := range []string{"description", "comparison"} {
		if s, ok := lookup(t, doc, f+path).(string); !ok || s == "" {
			t.Errorf("%s%s = %v, want a non-empty string", f, path, lookup(t, doc, f+path))
		}
	}
	if _, ok := lookup(t, doc, f+"met").(bool); !ok {
		t.Errorf("%smet = %v, want a bool", f, lookup(t, doc, f+"met"))
	}
	if num(f+"ratio") != num(f+"resumeP50Ratio") {
		t.Errorf("%sratio = %v, want resumeP50Ratio %v", f, num(f+"ratio"), num(f+"resumeP50Ratio"))
	}
	// min(200, small/2) measured resumes, after min(5, small/2) warm-ups.
	exact := map[string]float64{f + "resumes": float64(min(200, small/2)), f + "resumeWarmups": float64(min(5, small/2)),
		f + "stickyParks": 256, f + "target": 2}
	for size, n := range map[string]int{"small": small, "large": large} {
		p := f + size + "."
		positive := []string{"buildSec", "buildPerSec", "buildHeapInuseBytes", "buildGoroutines", "storeBytes",
			"storeBytesPerExecution", "openMs", "recoveryMs", "indexPassMs", "heapInuseBytes",
			"heapInuseBeforeOpenBytes", "goroutines", "resumeP50Ms", "resumeP99Ms", "resumeMaxMs"}
		if runtime.GOOS == "linux" {
			positive = append(positive, "rssBytes", "rssBeforeOpenBytes")
		}
		for _, l := range []string{"listUnfinished.", "listExecutions."} {
			positive = append(positive, l+"firstPagesMs", l+"pageMs", l+"deepPageMs")
			// The first pages: all of a population smaller than 10 pages of 100.
			pages := min((n+99)/100, 10)
			exact[p+l+"pageSize"], exact[p+l+"pages"], exact[p+l+"listed"] = 100, float64(pages), float64(min(n, 1000))
			if got, want := lookup(t, doc, p+l+"deepAfter"), scaleID(n*9/10); got != want {
				t.Errorf("%sdeepAfter = %v, want %s", p+l, got, want)
			}
		}
		for _, path := range positive {
			if num(p+path) <= 0 {
				t.Errorf("%s%s = %v, want a positive number", p, path, num(p+path))
			}
		}
		num(p + "runtimeRssBytes") // any sign: page faults move it
		// started, the step's started and completed, suspended.
		exact[p+"executions"], exact[p+"indexEntries"], exact[p+"eventsPerExecution"] = float64(n), float64(n), 4
		exact[p+"recovered"], exact[p+"recoveryTransactions"] = 0, 0
		if p50, p99, most := num(p+"resumeP50Ms"), num(p+"resumeP99Ms"), num(p+"resumeMaxMs"); p50 > p99 || p99 > most {
			t.Errorf("%s: resume p50 %v, p99 %v, max %v: want them ordered", size, p50, p99, most)
		}
		sizes, _ := lookup(t, doc, strings.TrimSuffix(p, ".")).(map[string]any)
		_, hasMain := sizes["mainFileBytes"]
		_, hasWAL := sizes["walBytes"]
		switch {
		case onSQLite && (!hasMain || !hasWAL):
			t.Errorf("%s: mainFileBytes or walBytes missing on SQLite", size)
		case onSQLite && num(p+"mainFileBytes")+num(p+"walBytes") != num(p+"storeBytes"):
			t.Errorf("%s: mainFileBytes + walBytes != storeBytes", size)
		case !onSQLite && (hasMain || hasWAL):
			t.Errorf("%s: mainFileBytes or walBytes reported on PostgreSQL", size)
		}
	}
	for path, want := range exact {
		if got := num(path); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	if l, s := num(f+"large.storeBytes"), num(f+"small.storeBytes"); l <= s {
		t.Errorf("storeBytes: large %v, small %v; want the large population to take more", l, s)
	}
}

// TestScaleFlags checks workload f's flags: refused out of their limits,
// f run only when named, and the large population's default on
// PostgreSQL.
func TestScaleFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-scale-small", "5"},
		{"-scale-small", "100", "-scale-large", "100"},
		{"-scale-large", strconv.Itoa(maxScaleExecutions + 1)},
		{"-postgres", "postgres://x", "-scale-small", "200000"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	f, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "a,b,c,d,e" || f.scaleSmall != 1000 || f.scaleLarge != 1_000_000 {
		t.Errorf("defaults: workloads %v, scale %d/%d; want a,b,c,d,e and 1000/1000000", f.workloads, f.scaleSmall, f.scaleLarge)
	}
	if f, err = parseFlags([]string{"-postgres", "postgres://x", "-workloads", "f,a"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.workloads, ",") != "a,f" || f.scaleLarge != 100_000 {
		t.Errorf("-postgres -workloads f,a: workloads %v, large %d; want a,f and 100000", f.workloads, f.scaleLarge)
	}
	if f, err = parseFlags([]string{"-postgres", "postgres://x", "-scale-large", "5000"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if f.scaleLarge != 5000 {
		t.Errorf("-postgres -scale-large 5000: large %d", f.scaleLarge)
	}
}
