package dispatch_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
)

func picks(t *testing.T, s dispatch.Scheduler, ready []string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		tenant, ok := s.Pick(ready)
		if !ok {
			t.Fatalf("Pick(%q) refused", ready)
		}
		s.Claimed(tenant, 1)
		got = append(got, tenant)
	}
	return got
}

// Weights 3:1 interleave (smooth WRR): a a b a, never a burst of three,
// and ties go to the tenant that sorts first.
func TestFairSchedulerSmoothWeightedRoundRobin(t *testing.T) {
	s, err := dispatch.NewFairScheduler(map[string]int{"a": 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := picks(t, s, []string{"a", "b"}, 8)
	if want := []string{"a", "a", "b", "a", "a", "a", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("picks %q, want %q", got, want)
	}
	eq, _ := dispatch.NewFairScheduler(nil, 2)
	if got, want := picks(t, eq, []string{"x", "y", "z"}, 6), []string{"x", "y", "z", "x", "y", "z"}; !slices.Equal(got, want) {
		t.Fatalf("equal weights picked %q, want %q", got, want)
	}
}

// A pick whose claim found nothing is undone: the same tenant comes next,
// and the sequence goes on as if the empty pick never happened.
func TestFairSchedulerEmptyClaimKeepsTheTurn(t *testing.T) {
	s, _ := dispatch.NewFairScheduler(map[string]int{"a": 3}, 1)
	ready := []string{"a", "b"}
	var got []string
	for len(got) < 4 {
		tenant, _ := s.Pick(ready)
		if tenant == "b" && !slices.Contains(got, "b-empty") {
			s.Claimed(tenant, 0)
			got = append(got, "b-empty")
			continue
		}
		s.Claimed(tenant, 1)
		if tenant == "a" || slices.Contains(got, "b-empty") {
			got = append(got, tenant)
		}
	}
	if want := []string{"a", "a", "b-empty", "b"}; !slices.Equal(got, want) {
		t.Fatalf("picks %q, want %q", got, want)
	}
}

// Items without a tenant wait while a tenant is ready (a claim for "" would
// claim any tenant's), and are claimed once none is.
func TestFairSchedulerNoTenantItemsGoLast(t *testing.T) {
	s, _ := dispatch.NewFairScheduler(nil, 1)
	if got := picks(t, s, []string{"", "a"}, 3); !slices.Equal(got, []string{"a", "a", "a"}) {
		t.Fatalf("picks %q, want only a", got)
	}
	if tenant, ok := s.Pick([]string{""}); tenant != "" || !ok {
		t.Fatalf("Pick([\"\"]) = %q, %v; want \"\", true", tenant, ok)
	}
	if _, ok := s.Pick(nil); ok {
		t.Fatal("Pick(nil) picked")
	}
}

func TestFIFOSchedulerPicksAnyTenant(t *testing.T) {
	if tenant, ok := (dispatch.FIFOScheduler{}).Pick([]string{"a", "b"}); tenant != "" || !ok {
		t.Fatalf("got %q, %v; want \"\", true", tenant, ok)
	}
	if _, ok := (dispatch.FIFOScheduler{}).Pick(nil); ok {
		t.Fatal("picked with nothing ready")
	}
}

func TestNewFairSchedulerRefusesBadWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights map[string]int
		def     int
		tenant  string
	}{
		{"zero default", nil, 0, ""},
		{"negative default", nil, -1, ""},
		{"default over the cap", nil, dispatch.MaxTenantWeight + 1, ""},
		{"zero weight", map[string]int{"b": 2, "a": 0}, 1, "a"},
		{"negative weight, first sorted named", map[string]int{"z": -1, "c": -5}, 1, "c"},
		{"the empty tenant", map[string]int{"": 2}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dispatch.NewFairScheduler(tc.weights, tc.def)
			var se *dispatch.SchedulerError
			if !errors.As(err, &se) || se.Tenant != tc.tenant {
				t.Fatalf("got %v; want a *SchedulerError for tenant %q", err, tc.tenant)
			}
		})
	}
}
