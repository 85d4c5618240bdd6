package projection_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
)

// next receives the watch's next update, failing the test when the watch
// ends first.
func next(t *testing.T, w *projection.QueryWatch) projection.QueryUpdate {
	t.Helper()
	select {
	case u, ok := <-w.Updates():
		if !ok {
			t.Fatalf("the watch ended: %v", w.Err())
		}
		return u
	case <-testCtx(t).Done():
		t.Fatal("no update")
	}
	return projection.QueryUpdate{}
}

func ids(p store.ReadModelPage) []string {
	var out []string
	for _, r := range p.Rows {
		out = append(out, r.ID)
	}
	return out
}

// TestWatchQueryDeliversEveryChangeInOrderAcrossAReconnect: a live query
// of the placed orders, woken by its runner's applies (the poll is an hour,
// so nothing else wakes it), delivers the page after each change, in
// order; reconnected with the digest it holds, it sends nothing for that
// page and goes on with the next change.
func TestWatchQueryDeliversEveryChangeInOrderAcrossAReconnect(t *testing.T) {
	s := newShop(t)
	r := s.runner(t)
	q := store.ReadModelQuery{Kind: "order", Where: map[string]string{"status": "placed"}}
	opts := projection.LiveOptions{Changes: r, Poll: time.Hour}
	w, err := projection.WatchQuery(testCtx(t), s.models, q, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if u := next(t, w); len(u.Page.Rows) != 0 || u.Digest != projection.PageDigest(u.Page) {
		t.Fatalf("the first page: %+v", u)
	}
	catchUp := func() {
		t.Helper()
		if _, err := r.CatchUp(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	want := [][]string{{"o1"}, {"o1", "o2"}, {"o2"}}
	s.place(t, "o1", "ann", 10)
	catchUp()
	var last projection.QueryUpdate
	for i, change := range []func(){nil, func() { s.place(t, "o2", "bob", 5) }, func() { s.decide(t, "o1", true) }} {
		if change != nil {
			change()
			catchUp()
		}
		last = next(t, w)
		if got := ids(last.Page); !slices.Equal(got, want[i]) {
			t.Fatalf("update %d: %v, want %v", i+1, got, want[i])
		}
	}
	w.Close()
	if err := w.Err(); err != nil {
		t.Fatalf("a closed watch: %v", err)
	}

	// Reconnect holding the last page: the first update is the next change.
	opts.Held = last.Digest
	w, err = projection.WatchQuery(testCtx(t), s.models, q, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.place(t, "o3", "cy", 7)
	catchUp()
	if got := ids(next(t, w).Page); !slices.Equal(got, []string{"o2", "o3"}) {
		t.Fatalf("after the reconnect: %v", got)
	}
}

// TestWatchQuerySeesAnotherWritersApplies: a writer the watch was not
// told of (another process's runner) is seen at the next poll.
func TestWatchQuerySeesAnotherWritersApplies(t *testing.T) {
	s := newShop(t)
	w, err := projection.WatchQuery(testCtx(t), s.models, store.ReadModelQuery{Kind: "order"}, projection.LiveOptions{Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if u := next(t, w); len(u.Page.Rows) != 0 {
		t.Fatalf("the first page: %v", ids(u.Page))
	}
	s.place(t, "o1", "ann", 10)
	if _, err := s.runner(t).CatchUp(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := ids(next(t, w).Page); !slices.Equal(got, []string{"o1"}) {
		t.Fatalf("the other writer's row: %v", got)
	}
}

// TestWatchQueryRefusesAnInvalidQuery: a bad cursor or kind is refused
// before anything is read.
func TestWatchQueryRefusesAnInvalidQuery(t *testing.T) {
	s := newShop(t)
	for _, q := range []store.ReadModelQuery{{Kind: "order", After: "bad\x00cursor"}, {Kind: ""}} {
		_, err := projection.WatchQuery(testCtx(t), s.models, q, projection.LiveOptions{})
		var ie *store.InvalidReadModelError
		if !errors.As(err, &ie) {
			t.Fatalf("%+v: %v", q, err)
		}
	}
}

// TestAPanickingProjectionIsIsolated: a Handle that panics is returned as
// *PanicError; nothing of its batch is written, the log is untouched, and
// the fixed projection folds from where the watermark stayed.
func TestAPanickingProjectionIsIsolated(t *testing.T) {
	s := newShop(t)
	s.place(t, "o1", "ann", 10)
	s.decide(t, "o1", true)
	logBefore, err := store.ReadRange(testCtx(t), s.events, "o1", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	good := shopProjection()
	bad := good
	bad.Handle = func(tx *projection.Tx, e event.Envelope) error {
		if e.Type == "order.shipped" {
			panic("a bug in the projection")
		}
		return good.Handle(tx, e)
	}
	r, err := projection.New(s.events, s.models, bad)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.CatchUp(testCtx(t))
	var pe *projection.PanicError
	if !errors.As(err, &pe) || pe.Projection != "shop" || pe.ExecutionID != "o1" || pe.Type != "order.shipped" || pe.Value != "a bug in the projection" || len(pe.Stack) == 0 {
		t.Fatalf("CatchUp of a panicking projection: %v", err)
	}
	if _, ok, err := s.models.Watermark(testCtx(t), "shop", "o1"); err != nil || ok {
		t.Fatalf("the watermark moved (%v, %v): the batch was written", ok, err)
	}
	if page, err := s.models.Query(testCtx(t), store.ReadModelQuery{Kind: "order"}); err != nil || len(page.Rows) != 0 {
		t.Fatalf("rows after the panic: %v, %v", page.Rows, err)
	}
	logAfter, err := store.ReadRange(testCtx(t), s.events, "o1", 0, 1<<20)
	if err != nil || len(logAfter) != len(logBefore) {
		t.Fatalf("the log changed: %d events, then %d (%v)", len(logBefore), len(logAfter), err)
	}
	fixed := s.runner(t)
	if _, err := fixed.CatchUp(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if c := customer(t, fixed, "ann"); c.Shipped != 10 || c.Orders != 1 {
		t.Fatalf("the fixed projection: %+v", c)
	}
}
