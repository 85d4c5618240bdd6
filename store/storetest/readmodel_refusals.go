package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
)

// versionConflict checks that err is the *store.ReadModelVersionConflictError
// of (kind, id) expecting expected at actual.
func versionConflict(t *testing.T, err error, kind, id string, expected, actual int64) {
	t.Helper()
	var vc *store.ReadModelVersionConflictError
	want := store.ReadModelVersionConflictError{Kind: kind, ID: id, Expected: expected, Actual: actual}
	if !errors.As(err, &vc) || !errors.Is(err, store.ErrReadModelVersionConflict) || *vc != want {
		t.Fatalf("Apply: %v, want %+v", err, want)
	}
}

func (k readModelKit) versionConflicts(t *testing.T) {
	s := k.open(t)
	mustApply(t, s, "p", "src", store.NoWatermark, 0, put(model("k", "a", `{"v":1}`), 0))
	mustApply(t, s, "p", "src", 0, 1, put(model("k", "a", `{"v":2}`), 1))
	refused := func(w store.ReadModelWrite, actual int64) {
		t.Helper()
		versionConflict(t, s.Apply(bg, "p", "src", 1, 2, []store.ReadModelWrite{w}), w.Row.Kind, w.Row.ID, w.ExpectVersion, actual)
	}
	refused(put(model("k", "a", `{"v":3}`), 1), 2) // stale
	refused(put(model("k", "a", `{"v":3}`), 3), 2) // future
	refused(put(model("k", "a", `{"v":3}`), 0), 2) // an insert over a row
	refused(put(model("k", "b", `{}`), 1), 0)      // an update of no row
	refused(del("k", "a", 1), 2)
	refused(del("k", "b", 1), 0)
	assertRow(t, mustGet(t, s, "k", "a"), model("k", "a", `{"v":2}`), "p", 2)
	assertWatermark(t, s, "p", "src", 1)

	// Of several refused writes, the first in (kind, id) order is named,
	// whatever the batch's order.
	mustApply(t, s, "p", "src", 1, 2, put(model("k", "c", `{}`), 0), put(model("j", "z", `{}`), 0))
	err := s.Apply(bg, "p", "src", 2, 3, []store.ReadModelWrite{
		put(model("k", "c", `{}`), 7), put(model("k", "a", `{}`), 9), put(model("j", "z", `{}`), 1), put(model("k", "b", `{}`), 4),
	})
	versionConflict(t, err, "k", "a", 9, 2)
	// A watermark conflict is reported before any version conflict.
	var wc *store.WatermarkConflictError
	if err := s.Apply(bg, "p", "src", 0, 3, []store.ReadModelWrite{put(model("k", "a", `{}`), 9)}); !errors.As(err, &wc) {
		t.Fatalf("a stale from with a stale version: %v, want a *store.WatermarkConflictError", err)
	}
	mustApply(t, s, "p", "src", 2, 3, put(model("k", "a", `{"v":3}`), 2)) // the right versions still go in
	assertRow(t, mustGet(t, s, "k", "a"), model("k", "a", `{"v":3}`), "p", 3)
}

func (k readModelKit) ownership(t *testing.T) {
	s := k.open(t)
	mustApply(t, s, "p", "src", store.NoWatermark, 0, put(model("k", "a", `{"by":"p"}`), 0))
	for _, w := range []store.ReadModelWrite{
		put(model("k", "a", `{"by":"q"}`), 1),
		put(model("k", "a", `{"by":"q"}`), 0), // the owner is named before the version
		del("k", "a", 1),
	} {
		err := s.Apply(bg, "q", "src", store.NoWatermark, 0, []store.ReadModelWrite{w})
		var oe *store.ReadModelOwnerError
		want := store.ReadModelOwnerError{Kind: "k", ID: "a", Projection: "q", Owner: "p"}
		if !errors.As(err, &oe) || !errors.Is(err, store.ErrReadModelOwned) || *oe != want {
			t.Fatalf("q writing p's row (%+v): %v, want %+v", w, err, want)
		}
	}
	assertRow(t, mustGet(t, s, "k", "a"), model("k", "a", `{"by":"p"}`), "p", 1)
	assertWatermark(t, s, "q", "src", store.NoWatermark)
	// A row p deleted is free again, for any projection.
	mustApply(t, s, "p", "src", 0, 1, del("k", "a", 1))
	mustApply(t, s, "q", "src", store.NoWatermark, 0, put(model("k", "a", `{"by":"q"}`), 0))
	assertRow(t, mustGet(t, s, "k", "a"), model("k", "a", `{"by":"q"}`), "q", 1)
}

func (k readModelKit) refusalsWriteNothing(t *testing.T) {
	s := k.open(t)
	mustApply(t, s, "p", "src", store.NoWatermark, 0,
		put(model("k", "a", `{"a":1}`, "f", "1"), 0), put(model("k", "b", `{"b":1}`, "f", "1"), 0))
	mustApply(t, s, "q", "src", store.NoWatermark, 0, put(model("k", "q", `{}`), 0))
	kinds, projections := []string{"k"}, []string{"p", "q"}
	before := stateOf(t, s, kinds, projections)
	good := []store.ReadModelWrite{
		put(model("k", "c", `{"c":1}`, "f", "1"), 0),
		put(model("k", "a", `{"a":2}`, "f", "2"), 1),
		del("k", "b", 1),
	}
	for _, c := range []struct {
		name   string
		source string
		from   int64
		bad    store.ReadModelWrite
		is     error
	}{
		{"a version conflict last in the batch", "src", 0, put(model("k", "z", `{}`), 3), store.ErrReadModelVersionConflict},
		{"a version conflict first in the batch", "src", 0, put(model("k", "0", `{}`), 3), store.ErrReadModelVersionConflict},
		{"a row of another projection", "src", 0, put(model("k", "q", `{}`), 1), store.ErrReadModelOwned},
		{"a stale watermark", "src", store.NoWatermark, put(model("k", "d", `{}`), 0), store.ErrWatermarkConflict},
		{"a new source with a conflict", "new", store.NoWatermark, put(model("k", "e", `{}`), 9), store.ErrReadModelVersionConflict},
		{"an invalid write", "src", 0, put(model("k", "d", `{`), 0), store.ErrInvalidReadModel},
	} {
		batch := append(append([]store.ReadModelWrite{}, good...), c.bad)
		if err := s.Apply(bg, "p", c.source, c.from, c.from+1, batch); !errors.Is(err, c.is) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.is)
		}
		sameState(t, "after "+c.name, s, kinds, projections, before)
		assertWatermark(t, s, "p", "new", store.NoWatermark)
	}
	mustApply(t, s, "p", "src", 0, 1, good...) // the good writes alone still go in
	assertQuery(t, s, store.ReadModelQuery{Kind: "k", Where: map[string]string{"f": "1"}}, "c")
	assertQuery(t, s, store.ReadModelQuery{Kind: "k", Where: map[string]string{"f": "2"}}, "a")
}

func (k readModelKit) reset(t *testing.T) {
	s := k.open(t)
	mustApply(t, s, "p", "s1", store.NoWatermark, 3,
		put(model("order", "a", `{}`, "f", "x"), 0), put(model("order", "b", `{}`, "f", "x"), 0), put(model("invoice", "a", `{}`, "f", "x"), 0))
	mustApply(t, s, "p", "s2", store.NoWatermark, 5, put(model("order", "c", `{}`, "f", "x"), 0))
	mustApply(t, s, "q", "s1", store.NoWatermark, 7, put(model("order", "q", `{}`, "f", "x"), 0))
	if err := s.Reset(bg, "p"); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][2]string{{"order", "a"}, {"order", "b"}, {"order", "c"}, {"invoice", "a"}} {
		assertAbsent(t, s, key[0], key[1])
	}
	assertWatermark(t, s, "p", "s1", store.NoWatermark)
	assertWatermark(t, s, "p", "s2", store.NoWatermark)
	assertWatermark(t, s, "q", "s1", 7)
	assertRow(t, mustGet(t, s, "order", "q"), model("order", "q", `{}`, "f", "x"), "q", 1)
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: map[string]string{"f": "x"}}, "q")
	assertQuery(t, s, store.ReadModelQuery{Kind: "invoice"})
	if page, err := s.Watermarks(bg, "p", "", 0); err != nil || len(page.Watermarks) != 0 {
		t.Fatalf("Watermarks after Reset: %+v %v", page, err)
	}
	// A rebuild starts from nothing: every source from NoWatermark, every
	// row from version 0.
	// A row rebuilt with the fields it had: no index entry of it survived.
	mustApply(t, s, "p", "s1", store.NoWatermark, 0, put(model("order", "a", `{"rebuilt":true}`, "f", "x"), 0))
	assertRow(t, mustGet(t, s, "order", "a"), model("order", "a", `{"rebuilt":true}`, "f", "x"), "p", 1)
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: map[string]string{"f": "x"}}, "a", "q")
	for _, p := range []string{"p", "nobody"} {
		if err := s.Reset(bg, p); err != nil {
			t.Fatalf("Reset(%q): %v", p, err)
		}
	}
	assertAbsent(t, s, "order", "a")
	assertWatermark(t, s, "q", "s1", 7)
}

func (k readModelKit) badInput(t *testing.T) {
	s := k.open(t)
	mustApply(t, s, "p", "src", store.NoWatermark, 0, put(model("k", "a", `{}`, "f", "1"), 0))
	kinds, projections := []string{"k", "x"}, []string{"p", "q"}
	before := stateOf(t, s, kinds, projections)
	w := func(r store.ReadModel) []store.ReadModelWrite { return []store.ReadModelWrite{put(r, 0)} }
	fields := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, "f"+strconv.Itoa(i), "v")
		}
		return out
	}
	tooMany := make([]store.ReadModelWrite, store.MaxReadModelWrites+1)
	for i := range tooMany {
		tooMany[i] = put(model("x", "r"+strconv.Itoa(i), `{}`), 0)
	}
	longID := strings.Repeat("i", event.MaxIDBytes+1)
	over := json.RawMessage(`"` + strings.Repeat("x", k.f.MaxDocBytes-1) + `"`)
	where := func(pairs ...string) map[string]string { return model("", "", "", pairs...).Fields }
	apply := func(projection, source string, from, to int64, writes []store.ReadModelWrite) error {
		return s.Apply(bg, projection, source, from, to, writes)
	}
	query := func(q store.ReadModelQuery) error { _, err := s.Query(bg, q); return err }
	overErr := apply("p", "src", 0, 1, w(store.ReadModel{Kind: "x", ID: "a", Doc: over}))
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"an empty projection", apply("", "src", 0, 1, nil), "projection"},
		{"a projection with a control character", apply("p\n", "src", 0, 1, nil), "projection"},
		{"an empty source", apply("p", "", 0, 1, nil), "source"},
		{"a source not UTF-8", apply("p", "s\xff", 0, 1, nil), "source"},
		{"a from below -1", apply("p", "src", -2, 1, nil), "from"},
		{"a to equal to from", apply("p", "src", 0, 0, nil), "to"},
		{"a to below from", apply("p", "src", 0, -1, nil), "to"},
		{"an empty kind", apply("p", "src", 0, 1, w(model("", "a", `{}`))), "kind"},
		{"an empty id", apply("p", "src", 0, 1, w(model("x", "", `{}`))), "id"},
		{"an id past the cap", apply("p", "src", 0, 1, w(model("x", longID, `{}`))), "id"},
		{"an id not UTF-8", apply("p", "src", 0, 1, w(model("x", "\xff", `{}`))), "id"},
		{"an empty doc", apply("p", "src", 0, 1, w(model("x", "a", ``))), "doc"},
		{"a doc not JSON", apply("p", "src", 0, 1, w(model("x", "a", `{"a":}`))), "doc"},
		{"a doc not UTF-8", apply("p", "src", 0, 1, w(model("x", "a", "\"\xff\""))), "doc"},
		{"a doc over the cap", overErr, "doc"},
		{"two writes of one row", apply("p", "src", 0, 1, []store.ReadModelWrite{put(model("x", "a", `{}`), 0), del("x", "a", 0)}), "id"},
		{"an empty field name", apply("p", "src", 0, 1, w(model("x", "a", `{}`, "", "v"))), "fields"},
		{"a field value with a NUL", apply("p", "src", 0, 1, w(model("x", "a", `{}`, "f", "a\x00b"))), "fields"},
		{"a field value not UTF-8", apply("p", "src", 0, 1, w(model("x", "a", `{}`, "f", "\xff"))), "fields"},
		{"a field value past the cap", apply("p", "src", 0, 1, w(model("x", "a", `{}`, "f", strings.Repeat("v", store.MaxReadModelFieldValueBytes+1)))), "fields"},
		{"too many fields", apply("p", "src", 0, 1, w(model("x", "a", `{}`, fields(store.MaxReadModelFields+1)...))), "fields"},
		{"too many writes", apply("p", "src", 0, 1, tooMany), "writes"},
		{"a negative expected version", apply("p", "src", 0, 1, []store.ReadModelWrite{put(model("x", "a", `{}`), -1)}), "expectVersion"},
		{"a query of no kind", query(store.ReadModelQuery{}), "kind"},
		{"a query with an invalid cursor", query(store.ReadModelQuery{Kind: "k", After: "a\x00"}), "after"},
		{"a query with a cursor past the cap", query(store.ReadModelQuery{Kind: "k", After: longID}), "after"},
		{"a query with a bad field name", query(store.ReadModelQuery{Kind: "k", Where: where("", "1")}), "where"},
		{"a query with a NUL value", query(store.ReadModelQuery{Kind: "k", Where: where("f", "\x00")}), "where"},
		{"a query with too many pairs", query(store.ReadModelQuery{Kind: "k", Where: where(fields(store.MaxReadModelFields + 1)...)}), "where"},
		{"Get of no kind", errOf3(s.Get(bg, "", "a")), "kind"},
		{"Get of a bad id", errOf3(s.Get(bg, "k", "a\n")), "id"},
		{"Watermark of no source", errOf3(s.Watermark(bg, "p", "")), "source"},
		{"Watermark of no projection", errOf3(s.Watermark(bg, "", "src")), "projection"},
		{"Watermarks of no projection", errOf2(s.Watermarks(bg, "", "", 0)), "projection"},
		{"Watermarks with an invalid cursor", errOf2(s.Watermarks(bg, "p", "\x7f", 0)), "after"},
		{"Reset of no projection", s.Reset(bg, ""), "projection"},
	}
	for _, c := range cases {
		var ie *store.InvalidReadModelError
		if !errors.As(c.err, &ie) || !errors.Is(c.err, store.ErrInvalidReadModel) || ie.Field != c.field {
			t.Errorf("%s: %v, want a *store.InvalidReadModelError of %q", c.name, c.err, c.field)
		}
	}
	var pe *event.PayloadTooLargeError
	if err := overErr; !errors.As(err, &pe) || pe.Field != "doc" || pe.Limit != k.f.MaxDocBytes || pe.Size != len(over) {
		t.Errorf("a doc over the cap: %v, want an *event.PayloadTooLargeError of the doc", err)
	}
	sameState(t, "after the refusals", s, kinds, projections, before)
	if k.f.MaxDocBytes <= 1<<20 {
		atCap := json.RawMessage(`"` + strings.Repeat("x", k.f.MaxDocBytes-2) + `"`)
		mustApply(t, s, "p", "src", 0, 1, put(store.ReadModel{Kind: "x", ID: "big", Doc: atCap}, 0))
		assertRow(t, mustGet(t, s, "x", "big"), store.ReadModel{Kind: "x", ID: "big", Doc: atCap}, "p", 1)
	}
}

// errOf2 and errOf3 keep the error of a call's results.
func errOf2[T any](_ T, err error) error { return err }

func errOf3[T any](_ T, _ bool, err error) error { return err }

func (k readModelKit) cancelledContext(t *testing.T) {
	s := k.open(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := s.Apply(ctx, "p", "src", store.NoWatermark, 0, []store.ReadModelWrite{put(model("k", "a", `{}`), 0)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context: %v, want context.Canceled", err)
	}
	assertAbsent(t, s, "k", "a")
	assertWatermark(t, s, "p", "src", store.NoWatermark)
	mustApply(t, s, "p", "src", store.NoWatermark, 0)
	if err := s.Reset(ctx, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reset with a cancelled context: %v, want context.Canceled", err)
	}
	assertWatermark(t, s, "p", "src", 0)
}
