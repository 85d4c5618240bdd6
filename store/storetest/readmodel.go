package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/store"
)

// ReadModelStoreFactory builds the stores RunReadModelStore checks.
type ReadModelStoreFactory struct {
	// New returns a fresh, empty store; the kit closes it if it has a
	// Close method. It is called once per subtest, and more than once by
	// the subtests that compare a concurrent run with a sequential one.
	New func(t *testing.T) store.ReadModelStore
	// Reopen is optional: it reopens the durable storage behind a store
	// New returned, after the kit closed it. When nil the Reopen subtest
	// is left out.
	Reopen func(t *testing.T, closed store.ReadModelStore) store.ReadModelStore
	// MaxDocBytes is the store's cap on one Doc; 0 means
	// store.MaxReadModelBytes. The kit checks that MaxDocBytes+1 bytes are
	// refused and that MaxDocBytes bytes are stored when that is at most 1
	// MiB.
	MaxDocBytes int
}

// readModelKit carries the factory through the ReadModelStore subtests.
type readModelKit struct{ f ReadModelStoreFactory }

// RunReadModelStore runs the ReadModelStore conformance kit against the
// stores f builds, one fresh store per named subtest: rows inserted,
// updated and deleted with the versions the store assigns, documents byte
// for byte and isolation from the caller's maps and buffers; the watermark
// compare-and-set (absent, stale and future froms, sources and projections
// apart, a step spanning several sequences); version conflicts (stale,
// future, insert over a row, update of an absent row) and the order in
// which refusals are reported; row ownership across projections; every
// refusal writing nothing, neither rows nor watermark; queries by kind and
// field equality, in code-point order of ids, keyset-paged across pages
// with rows written between them, page limits; watermark listings; Reset;
// bad input of every method refused with *store.InvalidReadModelError,
// writing nothing; a cancelled context; N goroutines racing one source
// (exactly one Apply wins each step, and the final state is that of a
// sequential run) and racing on one row from their own sources (no lost
// update); Close; and Reopen when f.Reopen is set.
func RunReadModelStore(t *testing.T, f ReadModelStoreFactory) {
	t.Helper()
	if f.New == nil {
		t.Fatal("storetest: ReadModelStoreFactory.New is nil")
	}
	if f.MaxDocBytes < 1 {
		f.MaxDocBytes = store.MaxReadModelBytes
	}
	k := readModelKit{f: f}
	t.Run("RowLifecycle", k.rowLifecycle)
	t.Run("WatermarkCompareAndSet", k.watermarkCAS)
	t.Run("VersionConflicts", k.versionConflicts)
	t.Run("Ownership", k.ownership)
	t.Run("RefusalsWriteNothing", k.refusalsWriteNothing)
	t.Run("QueryByKindAndFields", k.queryByFields)
	t.Run("QueryPaging", k.queryPaging)
	t.Run("QueryLimits", k.queryLimits)
	t.Run("WatermarkListing", k.watermarkListing)
	t.Run("Reset", k.reset)
	t.Run("BadInput", k.badInput)
	t.Run("CancelledContext", k.cancelledContext)
	t.Run("ConcurrentStepsOnOneSource", k.concurrentSteps)
	t.Run("ConcurrentWritersOnOneRow", k.concurrentRowWriters)
	t.Run("Closed", k.closed)
	if f.Reopen != nil {
		t.Run("Reopen", k.reopen)
	} else {
		t.Log("storetest: ReadModelStoreFactory.Reopen is nil, so durability across a reopen is not checked")
	}
}

// open returns a fresh store, closed at cleanup when it has a Close method.
func (k readModelKit) open(t *testing.T) store.ReadModelStore {
	t.Helper()
	s := k.f.New(t)
	if s == nil {
		t.Fatal("storetest: ReadModelStoreFactory.New returned nil")
	}
	if c, ok := s.(interface{ Close() error }); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
				t.Errorf("storetest: Close at cleanup: %v", err)
			}
		})
	}
	return s
}

// model returns a row of kind and id with doc and the fields given as
// name, value pairs.
func model(kind, id, doc string, fields ...string) store.ReadModel {
	r := store.ReadModel{Kind: kind, ID: id, Doc: json.RawMessage(doc)}
	if len(fields) > 0 {
		r.Fields = map[string]string{}
		for i := 0; i+1 < len(fields); i += 2 {
			r.Fields[fields[i]] = fields[i+1]
		}
	}
	return r
}

// put is the write of r expecting version v (0: an insert).
func put(r store.ReadModel, v int64) store.ReadModelWrite {
	return store.ReadModelWrite{Row: r, ExpectVersion: v}
}

// del is the delete of (kind, id) expecting version v.
func del(kind, id string, v int64) store.ReadModelWrite {
	return store.ReadModelWrite{Row: store.ReadModel{Kind: kind, ID: id}, ExpectVersion: v, Delete: true}
}

var bg = context.Background()

// mustApply applies and fails the test on any error.
func mustApply(t *testing.T, s store.ReadModelStore, projection, source string, from, to int64, writes ...store.ReadModelWrite) {
	t.Helper()
	if err := s.Apply(bg, projection, source, from, to, writes); err != nil {
		t.Fatalf("Apply(%q, %q, %d, %d, %d writes): %v", projection, source, from, to, len(writes), err)
	}
}

// mustGet returns the row (kind, id), failing when it is absent.
func mustGet(t *testing.T, s store.ReadModelStore, kind, id string) store.ReadModel {
	t.Helper()
	r, ok, err := s.Get(bg, kind, id)
	if err != nil || !ok {
		t.Fatalf("Get(%q, %q) = %v, %v: want the row", kind, id, ok, err)
	}
	return r
}

// assertAbsent fails when the row (kind, id) exists.
func assertAbsent(t *testing.T, s store.ReadModelStore, kind, id string) {
	t.Helper()
	if r, ok, err := s.Get(bg, kind, id); err != nil || ok {
		t.Fatalf("Get(%q, %q) = %+v, %v, %v: want no row", kind, id, r, ok, err)
	}
}

// assertRow checks a row read back against what was written, with the
// version and projection the store must have given it.
func assertRow(t *testing.T, got, want store.ReadModel, projection string, version int64) {
	t.Helper()
	switch {
	case got.Kind != want.Kind || got.ID != want.ID:
		t.Fatalf("row %q/%q, want %q/%q", got.Kind, got.ID, want.Kind, want.ID)
	case got.Projection != projection:
		t.Fatalf("row %q/%q has projection %q, want %q", got.Kind, got.ID, got.Projection, projection)
	case got.Version != version:
		t.Fatalf("row %q/%q is at version %d, want %d", got.Kind, got.ID, got.Version, version)
	case !maps.Equal(got.Fields, want.Fields):
		t.Fatalf("row %q/%q has fields %v, want %v", got.Kind, got.ID, got.Fields, want.Fields)
	case !bytes.Equal(got.Doc, want.Doc):
		t.Fatalf("row %q/%q has doc %q, want %q", got.Kind, got.ID, got.Doc, want.Doc)
	}
}

// assertWatermark checks the watermark of (projection, source).
func assertWatermark(t *testing.T, s store.ReadModelStore, projection, source string, want int64) {
	t.Helper()
	got, ok, err := s.Watermark(bg, projection, source)
	if err != nil || got != want || ok != (want != store.NoWatermark) {
		t.Fatalf("Watermark(%q, %q) = %d, %v, %v; want %d", projection, source, got, ok, err, want)
	}
}

// stateOf renders every row of kinds and every watermark of projections,
// read through Query and Watermarks page by page: two stores (or one store
// at two moments) hold the same read models iff their renderings are
// equal.
func stateOf(t *testing.T, s store.ReadModelStore, kinds, projections []string) string {
	t.Helper()
	var b strings.Builder
	for _, kind := range kinds {
		for after := ""; ; {
			page, err := s.Query(bg, store.ReadModelQuery{Kind: kind, After: after, Limit: store.MaxReadModelQueryLimit})
			if err != nil {
				t.Fatalf("Query(%q after %q): %v", kind, after, err)
			}
			for _, r := range page.Rows {
				b.WriteString(r.Kind + "/" + r.ID + " by " + r.Projection + " v" + strconv.FormatInt(r.Version, 10) +
					" " + store.ReadModelFieldsJSON(r.Fields) + " " + string(r.Doc) + "\n")
			}
			if after = page.Next; after == "" {
				break
			}
		}
	}
	for _, p := range projections {
		for after := ""; ; {
			page, err := s.Watermarks(bg, p, after, store.MaxReadModelQueryLimit)
			if err != nil {
				t.Fatalf("Watermarks(%q after %q): %v", p, after, err)
			}
			for _, w := range page.Watermarks {
				b.WriteString("watermark " + w.Projection + " " + w.Source + " " + strconv.FormatInt(w.Sequence, 10) + "\n")
			}
			if after = page.Next; after == "" {
				break
			}
		}
	}
	return b.String()
}

// sameState fails when the state of s differs from want.
func sameState(t *testing.T, what string, s store.ReadModelStore, kinds, projections []string, want string) {
	t.Helper()
	if got := stateOf(t, s, kinds, projections); got != want {
		t.Fatalf("%s: the store holds\n%s\nwant\n%s", what, got, want)
	}
}

func (k readModelKit) rowLifecycle(t *testing.T) {
	s := k.open(t)
	// Whitespace, key order, a number no float64 holds and <>& unescaped:
	// a document comes back byte for byte.
	a := model("order", "a", `{ "total": 12345678901234567890, "note":"<&>", "total":1.0 }`, "color", "red", "size", "L")
	b := model("order", "b", `[1, 2 ,3]`)
	mustApply(t, s, "orders", "exec-1", store.NoWatermark, 0, put(a, 0), put(b, 0))
	assertRow(t, mustGet(t, s, "order", "a"), a, "orders", 1)
	assertRow(t, mustGet(t, s, "order", "b"), b, "orders", 1)
	if got := mustGet(t, s, "order", "b"); len(got.Fields) != 0 {
		t.Fatalf("a row written without fields reads back with %v", got.Fields)
	}
	assertWatermark(t, s, "orders", "exec-1", 0)

	// The store copies: mutating what was written, or what was read,
	// changes nothing stored.
	want := model("order", "a", string(a.Doc), "color", "red", "size", "L")
	a.Fields["color"] = "mutated"
	a.Doc[2] = 'X'
	got := mustGet(t, s, "order", "a")
	got.Fields["color"] = "mutated too"
	got.Doc[0] = 'Y'
	assertRow(t, mustGet(t, s, "order", "a"), want, "orders", 1)

	// An update moves the version and replaces fields and doc whole; a
	// delete removes the row; a step may span several sequences.
	a2 := model("order", "a", `{"total":3}`, "color", "blue")
	mustApply(t, s, "orders", "exec-1", 0, 1, put(a2, 1), del("order", "b", 1))
	assertRow(t, mustGet(t, s, "order", "a"), a2, "orders", 2)
	assertAbsent(t, s, "order", "b")
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: map[string]string{"color": "red"}})
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: map[string]string{"size": "L"}})
	assertQuery(t, s, store.ReadModelQuery{Kind: "order", Where: map[string]string{"color": "blue"}}, "a")
	mustApply(t, s, "orders", "exec-1", 1, 5, put(b, 0))
	assertRow(t, mustGet(t, s, "order", "b"), b, "orders", 1) // a row written again starts over
	a3 := model("order", "a", `{"total":4}`, "color", "blue")
	mustApply(t, s, "orders", "exec-1", 5, 6, put(a3, 2), del("order", "never-written", 0))
	assertRow(t, mustGet(t, s, "order", "a"), a3, "orders", 3)
	assertAbsent(t, s, "order", "never-written")
	// A delete's fields and doc are ignored, whatever they hold.
	junk := store.ReadModelWrite{Delete: true, ExpectVersion: 1, Row: store.ReadModel{Kind: "order", ID: "b",
		Fields: map[string]string{"": "\x00"}, Doc: []byte("\x00\xff{")}}
	absent := junk
	absent.Row.ID, absent.ExpectVersion = "absent", 0
	mustApply(t, s, "orders", "exec-1", 6, 7, junk, absent)
	assertAbsent(t, s, "order", "b")
	mustApply(t, s, "orders", "exec-1", 7, 8, put(b, 0))
	mustApply(t, s, "orders", "exec-1", 8, 9) // no writes: the watermark alone moves
	assertWatermark(t, s, "orders", "exec-1", 9)
	assertAbsent(t, s, "order", "unknown")
	assertAbsent(t, s, "invoice", "a")
}

func (k readModelKit) watermarkCAS(t *testing.T) {
	s := k.open(t)
	conflict := func(from, to, actual int64) {
		t.Helper()
		err := s.Apply(bg, "p", "src", from, to, []store.ReadModelWrite{put(model("k", "x", `{}`), 0)})
		var wc *store.WatermarkConflictError
		if !errors.As(err, &wc) || !errors.Is(err, store.ErrWatermarkConflict) ||
			*wc != (store.WatermarkConflictError{Projection: "p", Source: "src", Expected: from, Actual: actual}) {
			t.Fatalf("Apply from %d to %d: %v, want a *store.WatermarkConflictError at %d", from, to, err, actual)
		}
		assertAbsent(t, s, "k", "x")
	}
	assertWatermark(t, s, "p", "src", store.NoWatermark)
	conflict(0, 1, store.NoWatermark) // a from ahead of nothing
	mustApply(t, s, "p", "src", store.NoWatermark, 3)
	assertWatermark(t, s, "p", "src", 3)
	conflict(store.NoWatermark, 4, 3) // starting again over a watermark
	conflict(2, 4, 3)                 // stale
	conflict(4, 5, 3)                 // future
	mustApply(t, s, "p", "src", 3, 4)
	assertWatermark(t, s, "p", "src", 4)
	// Sources and projections are apart.
	assertWatermark(t, s, "p", "other", store.NoWatermark)
	assertWatermark(t, s, "q", "src", store.NoWatermark)
	mustApply(t, s, "p", "other", store.NoWatermark, 0)
	mustApply(t, s, "q", "src", store.NoWatermark, 9)
	assertWatermark(t, s, "p", "src", 4)
	assertWatermark(t, s, "p", "other", 0)
	assertWatermark(t, s, "q", "src", 9)
}

func (k readModelKit) reopen(t *testing.T) {
	s := k.f.New(t)
	mustApply(t, s, "p", "src", store.NoWatermark, 2,
		put(model("k", "a", `{"a":1}`, "f", "1"), 0), put(model("k", "b", `{"b": 2}`), 0))
	mustApply(t, s, "p", "src", 2, 3, put(model("k", "a", `{"a":2}`, "f", "2"), 1))
	kinds, projections := []string{"k"}, []string{"p"}
	want := stateOf(t, s, kinds, projections)
	c, ok := s.(interface{ Close() error })
	if !ok {
		t.Fatalf("storetest: %T has Reopen but no Close", s)
	}
	closeStore(t, c)
	r := k.f.Reopen(t, s)
	if c, ok := r.(interface{ Close() error }); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	sameState(t, "after reopening", r, kinds, projections, want)
	assertQuery(t, r, store.ReadModelQuery{Kind: "k", Where: map[string]string{"f": "2"}}, "a")
	mustApply(t, r, "p", "src", 3, 4, put(model("k", "a", `{"a":3}`), 2))
	if got := mustGet(t, r, "k", "a"); got.Version != 3 {
		t.Fatalf("a write after reopening left version %d, want 3", got.Version)
	}
}

func (k readModelKit) closed(t *testing.T) {
	s := k.open(t)
	c, ok := s.(interface{ Close() error })
	if !ok {
		t.Skipf("storetest: %T has no Close method", s)
	}
	mustApply(t, s, "p", "src", store.NoWatermark, 0, put(model("k", "a", `{}`), 0))
	closeStore(t, c)
	_, _, errWatermark := s.Watermark(bg, "p", "src")
	_, errWatermarks := s.Watermarks(bg, "p", "", 0)
	_, _, errGet := s.Get(bg, "k", "a")
	_, errQuery := s.Query(bg, store.ReadModelQuery{Kind: "k"})
	for _, c := range []struct {
		name string
		err  error
	}{
		{"Apply", s.Apply(bg, "p", "src", 0, 1, nil)},
		{"Reset", s.Reset(bg, "p")},
		{"Watermark", errWatermark},
		{"Watermarks", errWatermarks},
		{"Get", errGet},
		{"Query", errQuery},
	} {
		if !errors.Is(c.err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want store.ErrClosed", c.name, c.err)
		}
	}
}
