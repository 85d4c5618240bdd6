package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// listRefNames lists the refs under prefix and returns their names.
func listRefNames(t *testing.T, r store.BranchRegistry, prefix string) []string {
	t.Helper()
	refs, err := r.ListRefs(context.Background(), prefix)
	if err != nil {
		t.Fatalf("ListRefs(%q): %v", prefix, err)
	}
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = ref.Name
	}
	return names
}

// listByPrefix: ListRefs returns exactly the refs under a prefix, sorted by
// name in code-point order, with their current execution and version.
func (k branchKit) listByPrefix(t *testing.T) {
	r := k.open(t)
	for _, name := range []string{"feature/b", "main", "feature/é", "featurex", "feature/a", "release/1", "Feature/z", "feature/日本"} {
		mustCreate(t, r, name, "exec-"+name)
	}
	move(t, r, "feature/b", "exec-moved", 1, 2)
	cases := []struct {
		prefix string
		want   []string
	}{
		{"feature/", []string{"feature/a", "feature/b", "feature/é", "feature/日本"}},
		{"feature", []string{"feature/a", "feature/b", "feature/é", "feature/日本", "featurex"}},
		{"", []string{"Feature/z", "feature/a", "feature/b", "feature/é", "feature/日本", "featurex", "main", "release/1"}},
		{"main", []string{"main"}},
		{"nomatch", nil},
		{"feature/é", []string{"feature/é"}},
	}
	for _, c := range cases {
		if got := listRefNames(t, r, c.prefix); !slices.Equal(got, c.want) {
			t.Fatalf("ListRefs(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	refs, err := r.ListRefs(context.Background(), "feature/b")
	if err != nil || len(refs) != 1 || refs[0] != (store.Ref{Name: "feature/b", ExecutionID: "exec-moved", Version: 2}) {
		t.Fatalf("ListRefs(feature/b) = %+v, %v; want the moved ref at version 2", refs, err)
	}
}
