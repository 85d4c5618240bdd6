package main

import (
	"testing"
)

// TestInspectListReportsEveryField runs workload h in-process on SQLite at
// tiny sizes and checks its report: every field there and sane, the order
// the catalog gives, and the counts the harness fixes. It checks no
// timing. The workload itself fails the run should a page hold another
// number of executions than its query selects, come in another order
// than newest first, or its counts not add up to the population.
func TestInspectListReportsEveryField(t *testing.T) {
	doc := runHarness(t, "-workloads", "h", "-duration", "200ms", "-db-dir", t.TempDir(),
		"-inspect-small", "12", "-inspect-large", "80")
	if s := lookup(t, doc, "config.store"); s != "sqlite" {
		t.Errorf("config.store = %v, want sqlite", s)
	}
	num := func(path string) float64 { t.Helper(); return number(t, doc, path) }
	for size, n := range map[string]float64{"small": 12, "large": 80} { //loom:order-independent each size on its own
		if got := num("workloads.h." + size + ".executions"); got != n {
			t.Errorf("workloads.h.%s.executions = %v, want %v", size, got, n)
		}
		if got := lookup(t, doc, "workloads.h."+size+".order"); got != "recent" {
			t.Errorf("workloads.h.%s.order = %v, want recent", size, got)
		}
		for _, f := range []string{"firstMs", "suspendedMs", "prefixMs", "countsMs", "rawListMs", "firstOverRaw", "buildSec"} {
			if x := num("workloads.h." + size + "." + f); x <= 0 {
				t.Errorf("workloads.h.%s.%s = %v, want a positive number", size, f, x)
			}
		}
	}
	if x := num("workloads.h.large.nextMs"); x <= 0 {
		t.Errorf("workloads.h.large.nextMs = %v, want a positive number (80 executions have a second page)", x)
	}
	if got := num("workloads.h.target"); got != 2 {
		t.Errorf("workloads.h.target = %v, want 2", got)
	}
	if got := num("workloads.h.ratio"); got <= 0 {
		t.Errorf("workloads.h.ratio = %v, want a positive number", got)
	}
	if _, ok := lookup(t, doc, "workloads.h.met").(bool); !ok {
		t.Error("workloads.h.met is not a bool")
	}
}
