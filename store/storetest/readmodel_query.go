package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// queryIDs returns the ids of every row q selects, following Next page by
// page, and checks the paging contract on the way: no page over its limit,
// ids strictly ascending across pages, Next the last id of a page exactly
// when another page follows (an empty page ends the result).
func queryIDs(t *testing.T, s store.ReadModelStore, q store.ReadModelQuery) []string {
	t.Helper()
	limit := store.ReadModelPageLimit(q.Limit)
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("Query(%+v) is still paging after 10000 pages", q)
		}
		page, err := s.Query(bg, q)
		if err != nil {
			t.Fatalf("Query(%+v): %v", q, err)
		}
		if len(page.Rows) > limit {
			t.Fatalf("Query(%+v) returned %d rows, over its limit %d", q, len(page.Rows), limit)
		}
		for _, r := range page.Rows {
			if r.Kind != q.Kind {
				t.Fatalf("Query(%+v) returned a row of kind %q", q, r.Kind)
			}
			if n := len(ids); n > 0 && r.ID <= ids[n-1] || n == 0 && q.After != "" && r.ID <= q.After {
				t.Fatalf("Query(%+v) returned %q out of order (after %v)", q, r.ID, ids)
			}
			ids = append(ids, r.ID)
		}
		if page.Next == "" {
			return ids
		}
		if len(page.Rows) == 0 || page.Next != page.Rows[len(page.Rows)-1].ID {
			t.Fatalf("Query(%+v): Next %q is not the last id of its page %v", q, page.Next, page.Rows)
		}
		q.After = page.Next
	}
}

// assertQuery checks that q selects exactly the rows want, in that order.
func assertQuery(t *testing.T, s store.ReadModelStore, q store.ReadModelQuery, want ...string) {
	t.Helper()
	if got := queryIDs(t, s, q); !slices.Equal(got, want) {
		t.Fatalf("Query(kind %q, where %v) = %q, want %q", q.Kind, q.Where, got, want)
	}
}

func (k readModelKit) queryByFields(t *testing.T) {
	s := k.open(t)
	rows := []store.ReadModel{
		model("order", "1", `{}`, "status", "open", "region", "eu"),
		model("order", "2", `{}`, "status", "open", "region", "us"),
		model("order", "3", `{}`, "status", "Open", "region", "eu"), // values are case-sensitive
		model("order", "4", `{}`, "status", "closed", "region", "eu", "empty", ""),
		model("order", "5", `{}`, "status", "open", "region", "eu", "note", "café ☕"),
		model("order", "6", `{}`), // no fields at all
		// The same ids and fields in another kind never mix in.
		model("invoice", "1", `{}`, "status", "open", "region", "eu"),
		model("invoice", "7", `{}`, "status", "open"),
	}
	var writes []store.ReadModelWrite
	for _, r := range rows {
		writes = append(writes, put(r, 0))
	}
	mustApply(t, s, "p", "src", store.NoWatermark, 0, writes...)
	where := func(pairs ...string) map[string]string { return model("", "", "", pairs...).Fields }
	cases := []struct {
		kind  string
		where map[string]string
		want  []string
	}{
		{"order", nil, []string{"1", "2", "3", "4", "5", "6"}},
		{"order", where("status", "open"), []string{"1", "2", "5"}},
		{"order", where("status", "open", "region", "eu"), []string{"1", "5"}},
		{"order", where("region", "eu", "status", "open"), []string{"1", "5"}},
		{"order", where("status", "Open"), []string{"3"}},
		{"order", where("empty", ""), []string{"4"}}, // an empty value matches only a row that has the field
		{"order", where("note", "café ☕"), []string{"5"}},
		{"order", where("status", "open", "region", "asia"), nil},
		{"order", where("unknown", "x"), nil},
		{"invoice", where("status", "open"), []string{"1", "7"}},
		{"invoice", where("region", "eu"), []string{"1"}},
		{"nothing", nil, nil},
	}
	for _, c := range cases {
		assertQuery(t, s, store.ReadModelQuery{Kind: c.kind, Where: c.where}, c.want...)
		// Page by page, one row each, the result is the same.
		assertQuery(t, s, store.ReadModelQuery{Kind: c.kind, Where: c.where, Limit: 1}, c.want...)
	}
	// A query's rows are the rows Get returns.
	page, err := s.Query(bg, store.ReadModelQuery{Kind: "order", Where: where("status", "open")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Rows {
		assertRow(t, r, mustGet(t, s, r.Kind, r.ID), "p", 1)
	}
	// Moving a field moves the row between results.
	mustApply(t, s, "p", "src", 0, 1, put(model("order", "2", `{}`, "status", "closed"), 1))
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: where("status", "open")}, "1", "5")
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: where("status", "closed")}, "2", "4")
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: where("region", "us")})
}

func (k readModelKit) queryPaging(t *testing.T) {
	s := k.open(t)
	// Code-point order: upper case before lower, and U+FFFD before an
	// emoji (UTF-16 order would put the emoji's surrogates first).
	ids := []string{"b", "a", "B", "a0", "a-", "é", "z", "\uFFFD", "😀", "m", "n", "o"}
	var writes []store.ReadModelWrite
	for i, id := range ids {
		parity := "even"
		if i%2 == 1 {
			parity = "odd"
		}
		writes = append(writes, put(model("item", id, `{}`, "parity", parity), 0))
	}
	mustApply(t, s, "p", "src", store.NoWatermark, 0, writes...)
	sorted := slices.Sorted(slices.Values(ids))
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", Limit: 2}, sorted...)
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", Limit: 5}, sorted...)
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", Limit: len(ids)}, sorted...) // one full page: Next ""
	var even []string
	for _, id := range sorted {
		if slices.Index(ids, id)%2 == 0 {
			even = append(even, id)
		}
	}
	// Six rows of parity even, three full pages of two: the third says it
	// is the last.
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", Where: map[string]string{"parity": "even"}, Limit: 2}, even...)
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", After: "m"}, "n", "o", "z", "é", "\uFFFD", "😀")
	assertQuery(t, s, store.ReadModelQuery{Kind: "item", After: "a cursor no row has"}, sorted[2:]...)

	// Rows written between pages: one that sorts before the cursor is not
	// seen, one after it is, a deleted one after it is not.
	q := store.ReadModelQuery{Kind: "item", Limit: 4}
	first, err := s.Query(bg, q)
	if err != nil || first.Next != "a0" {
		t.Fatalf("first page %+v %v, want it to end at a0", first, err)
	}
	mustApply(t, s, "p", "src", 0, 1,
		put(model("item", "a", `{"again":true}`, "parity", "even"), 1),
		put(model("item", "A", `{}`), 0), put(model("item", "c", `{}`), 0), del("item", "m", 1))
	q.After = first.Next
	assertQuery(t, s, q, "b", "c", "n", "o", "z", "é", "\uFFFD", "😀")
}

func (k readModelKit) queryLimits(t *testing.T) {
	s := k.open(t)
	const n = store.MaxReadModelQueryLimit + 1
	var writes []store.ReadModelWrite
	for i := range n {
		writes = append(writes, put(model("bulk", fmt.Sprintf("r%05d", i), `{}`, "all", "yes"), 0))
	}
	mustApply(t, s, "p", "src", store.NoWatermark, 0, writes[:store.MaxReadModelWrites]...)
	mustApply(t, s, "p", "src", 0, 1, writes[store.MaxReadModelWrites:]...)
	for _, c := range []struct {
		limit, want int
		where       map[string]string
	}{
		{0, store.DefaultReadModelQueryLimit, nil},
		{-5, store.DefaultReadModelQueryLimit, nil},
		{7, 7, map[string]string{"all": "yes"}},
		{store.MaxReadModelQueryLimit + 500, store.MaxReadModelQueryLimit, nil},
		{store.MaxReadModelQueryLimit + 500, store.MaxReadModelQueryLimit, map[string]string{"all": "yes"}},
	} {
		page, err := s.Query(bg, store.ReadModelQuery{Kind: "bulk", Where: c.where, Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Rows) != c.want || page.Next != page.Rows[c.want-1].ID {
			t.Fatalf("Query with limit %d: %d rows, Next %q; want %d rows and a cursor", c.limit, len(page.Rows), page.Next, c.want)
		}
	}
	if got := queryIDs(t, s, store.ReadModelQuery{Kind: "bulk", Where: map[string]string{"all": "yes"}, Limit: 1 << 30}); len(got) != n {
		t.Fatalf("paging at the largest limit read %d rows, want %d", len(got), n)
	}
}

func (k readModelKit) watermarkListing(t *testing.T) {
	s := k.open(t)
	sources := []string{"s5", "s1", "é", "s3", "S", "s0", "s2", "😀", "s4"}
	for i, src := range sources {
		mustApply(t, s, "p", src, store.NoWatermark, int64(i))
		mustApply(t, s, "q", src+"-q", store.NoWatermark, 100)
	}
	want := slices.Sorted(slices.Values(sources))
	for _, limit := range []int{1, 2, 3, len(sources), 0} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			page, err := s.Watermarks(bg, "p", after, limit)
			if err != nil || pages > len(sources) {
				t.Fatalf("Watermarks(p, %q, %d): %+v %v", after, limit, page, err)
			}
			for _, w := range page.Watermarks {
				if w.Projection != "p" || w.Sequence != int64(slices.Index(sources, w.Source)) {
					t.Fatalf("Watermarks(p) listed %+v", w)
				}
				got = append(got, w.Source)
			}
			if page.Next == "" {
				break
			}
			if n := len(page.Watermarks); n == 0 || page.Next != page.Watermarks[n-1].Source {
				t.Fatalf("Watermarks(p, %q, %d): Next %q is not the last source of its page", after, limit, page.Next)
			}
			after = page.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Watermarks(p) with limit %d listed %q, want %q", limit, got, want)
		}
	}
	page, err := s.Watermarks(bg, "nobody", "", 0)
	if err != nil || len(page.Watermarks) != 0 || page.Next != "" {
		t.Fatalf("Watermarks of a projection with none: %+v %v", page, err)
	}
}
