package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The shop: an order flow emits order.placed, then order.shipped or
// order.cancelled, as its gate is answered. The projection keeps a row per
// order (indexed by status and customer) and a row per customer with the
// total of its shipped orders — a row many executions write.

type placed struct {
	Customer string `json:"customer"`
	Total    int    `json:"total"`
}

func orderFlow() *loom.Flow {
	return loom.NewFlow("order", func(c *loom.Context, in placed) (string, error) {
		if err := c.Emit("order.placed", in); err != nil {
			return "", err
		}
		ship, err := loom.Suspend[bool](c, "decide")
		if err != nil {
			return "", err
		}
		if !ship {
			return "cancelled", c.Emit("order.cancelled", map[string]any{})
		}
		return "shipped", c.Emit("order.shipped", map[string]any{})
	})
}

type orderDoc struct {
	Customer string `json:"customer"`
	Total    int    `json:"total"`
	Status   string `json:"status"`
}

type customerDoc struct {
	Shipped int `json:"shipped"`
	Orders  int `json:"orders"`
}

func shopProjection() projection.Projection {
	return projection.Projection{Name: "shop", Flows: []string{"order"}, Handle: func(tx *projection.Tx, e event.Envelope) error {
		switch e.Type {
		case "order.placed":
			var p placed
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return err
			}
			doc, _ := json.Marshal(orderDoc{Customer: p.Customer, Total: p.Total, Status: "placed"})
			tx.Put(store.ReadModel{Kind: "order", ID: e.ExecutionID, Fields: map[string]string{"status": "placed", "customer": p.Customer}, Doc: doc})
		case "order.shipped", "order.cancelled":
			row, ok := tx.Get("order", e.ExecutionID)
			if !ok {
				return fmt.Errorf("no order row for %s", e.ExecutionID)
			}
			var o orderDoc
			if err := json.Unmarshal(row.Doc, &o); err != nil {
				return err
			}
			o.Status = map[string]string{"order.shipped": "shipped", "order.cancelled": "cancelled"}[e.Type]
			row.Doc, _ = json.Marshal(o)
			row.Fields = map[string]string{"status": o.Status, "customer": o.Customer}
			tx.Put(row)
			c := customerDoc{}
			if cr, ok := tx.Get("customer", o.Customer); ok {
				if err := json.Unmarshal(cr.Doc, &c); err != nil {
					return err
				}
			}
			c.Orders++
			if o.Status == "shipped" {
				c.Shipped += o.Total
			}
			doc, _ := json.Marshal(c)
			tx.Put(store.ReadModel{Kind: "customer", ID: o.Customer, Doc: doc})
		}
		return nil
	}}
}

type shop struct {
	events *memstore.EventStore
	models *memstore.ReadModelStore
	rt     *loom.Runtime
}

func newShop(t *testing.T) *shop {
	t.Helper()
	s := &shop{events: memstore.NewEventStore(), models: memstore.NewReadModelStore()}
	rt, err := loom.New(loom.Config{Events: s.events, Flows: []*loom.Flow{orderFlow()}, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	s.rt = rt
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// place starts an order and waits for its park; decide answers it.
func (s *shop) place(t *testing.T, id, customer string, total int) {
	t.Helper()
	if _, err := s.rt.Start(testCtx(t), "order", placed{Customer: customer, Total: total}, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.WaitForSuspend(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
}

func (s *shop) decide(t *testing.T, id string, ship bool) {
	t.Helper()
	payload, _ := json.Marshal(ship)
	if err := s.rt.Resume(testCtx(t), id, loom.ResumeEvent{EventType: "decide", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.rt.WaitForCompletion(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
}

func (s *shop) runner(t *testing.T) *projection.Runner {
	t.Helper()
	r, err := projection.New(s.events, s.models, shopProjection())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rows returns every row of kind, all pages.
func rows(t *testing.T, r *projection.Runner, q store.ReadModelQuery) []store.ReadModel {
	t.Helper()
	var out []store.ReadModel
	for {
		page, err := r.Query(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Rows...)
		if page.Next == "" {
			return out
		}
		q.After = page.Next
	}
}

func customer(t *testing.T, r *projection.Runner, id string) customerDoc {
	t.Helper()
	for _, row := range rows(t, r, store.ReadModelQuery{Kind: "customer"}) {
		if row.ID == id {
			var c customerDoc
			if err := json.Unmarshal(row.Doc, &c); err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	return customerDoc{}
}

// TestCatchUpFoldsOnlyNewEventsAndQueriesByField: a first CatchUp builds
// the rows; a second folds only what was appended since; rows are found by
// field equality, a page at a time.
func TestCatchUpFoldsOnlyNewEventsAndQueriesByField(t *testing.T) {
	s := newShop(t)
	for i := range 5 {
		s.place(t, "o-"+strconv.Itoa(i), "ada", 10*(i+1))
	}
	s.decide(t, "o-0", true)
	s.decide(t, "o-1", false)
	r := s.runner(t)
	first, err := r.CatchUp(testCtx(t))
	if err != nil || first.Executions != 5 {
		t.Fatalf("first CatchUp: %+v %v", first, err)
	}
	placedRows := rows(t, r, store.ReadModelQuery{Kind: "order", Where: map[string]string{"status": "placed", "customer": "ada"}, Limit: 2})
	if len(placedRows) != 3 || placedRows[0].ID != "o-2" || placedRows[2].ID != "o-4" {
		t.Fatalf("placed orders of ada: %v", placedRows)
	}
	if c := customer(t, r, "ada"); c != (customerDoc{Shipped: 10, Orders: 2}) {
		t.Fatalf("ada after the first CatchUp: %+v", c)
	}
	if again, err := r.CatchUp(testCtx(t)); err != nil || again.Events["shop"] != 0 {
		t.Fatalf("a CatchUp with nothing new: %+v %v", again, err)
	}
	s.decide(t, "o-2", true)
	next, err := r.CatchUp(testCtx(t))
	if err != nil || next.Executions != 1 {
		t.Fatalf("CatchUp after one decision: %+v %v", next, err)
	}
	if c := customer(t, r, "ada"); c != (customerDoc{Shipped: 40, Orders: 3}) {
		t.Fatalf("ada after o-2 shipped: %+v", c)
	}
}

// TestRebuildGivesTheSameRows is the property that makes a read model a
// cache: for seeded random histories caught up at random points, Rebuild
// from scratch gives exactly the rows the incremental catch-ups built.
func TestRebuildGivesTheSameRows(t *testing.T) {
	for seed := range uint64(8) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 1))
			s := newShop(t)
			r := s.runner(t)
			var open []string
			for i := range 12 {
				id := fmt.Sprintf("o-%02d", i)
				s.place(t, id, []string{"ada", "bob", "cy"}[rnd.IntN(3)], 1+rnd.IntN(100))
				open = append(open, id)
				if rnd.IntN(2) == 0 && len(open) > 0 {
					k := rnd.IntN(len(open))
					s.decide(t, open[k], rnd.IntN(3) > 0)
					open = append(open[:k], open[k+1:]...)
				}
				if rnd.IntN(3) == 0 {
					if _, err := r.CatchUp(testCtx(t)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := r.CatchUp(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			before := append(rows(t, r, store.ReadModelQuery{Kind: "order"}), rows(t, r, store.ReadModelQuery{Kind: "customer"})...)
			if _, err := r.Rebuild(testCtx(t), "shop"); err != nil {
				t.Fatal(err)
			}
			after := append(rows(t, r, store.ReadModelQuery{Kind: "order"}), rows(t, r, store.ReadModelQuery{Kind: "customer"})...)
			if len(before) == 0 || !reflect.DeepEqual(docsOf(before), docsOf(after)) {
				t.Fatalf("rebuilt rows differ:\n%v\n%v", docsOf(before), docsOf(after))
			}
		})
	}
}

// docsOf is the rows without their versions (a rebuild writes each row
// afresh, so its revision counts differ).
func docsOf(rs []store.ReadModel) []string {
	var out []string
	for _, r := range rs {
		fields, _ := json.Marshal(r.Fields)
		out = append(out, r.Kind+"/"+r.ID+" "+string(fields)+" "+string(r.Doc))
	}
	return out
}

// TestConcurrentRunnersConvergeWithoutDoubleCounting: several runners
// (as on several nodes) catch up the same store at once; every event is
// folded once — the customer totals are exact.
func TestConcurrentRunnersConvergeWithoutDoubleCounting(t *testing.T) {
	s := newShop(t)
	want := customerDoc{}
	for i := range 20 {
		id := "o-" + strconv.Itoa(i)
		s.place(t, id, "ada", i+1)
		s.decide(t, id, i%2 == 0)
		want.Orders++
		if i%2 == 0 {
			want.Shipped += i + 1
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		r := s.runner(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.CatchUp(context.Background())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := customer(t, s.runner(t), "ada"); got != want {
		t.Fatalf("ada folded by 4 runners: %+v, want %+v", got, want)
	}
}

// TestNewRefusesBadProjections and a failing Handle writes nothing.
func TestNewRefusesBadProjectionsAndAFailingHandleWritesNothing(t *testing.T) {
	s := newShop(t)
	for _, ps := range [][]projection.Projection{
		{{Name: "", Handle: shopProjection().Handle}},
		{{Name: "x"}},
		{shopProjection(), shopProjection()},
	} {
		if _, err := projection.New(s.events, s.models, ps...); err == nil {
			t.Fatalf("New(%d projections) accepted a bad set", len(ps))
		}
	}
	s.place(t, "o-1", "ada", 5)
	failing := projection.Projection{Name: "failing", Handle: func(tx *projection.Tx, e event.Envelope) error {
		tx.Put(store.ReadModel{Kind: "note", ID: e.ExecutionID, Doc: json.RawMessage(`{}`)})
		if e.Type == "order.placed" {
			return fmt.Errorf("refusing %s", e.Type)
		}
		return nil
	}}
	r, err := projection.New(s.events, s.models, failing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CatchUp(testCtx(t)); err == nil {
		t.Fatal("a failing Handle did not fail the CatchUp")
	}
	if page, _ := r.Query(testCtx(t), store.ReadModelQuery{Kind: "note"}); len(page.Rows) != 0 {
		t.Fatalf("the failed batch wrote %d rows", len(page.Rows))
	}
	if _, ok, _ := s.models.Watermark(testCtx(t), "failing", "o-1"); ok {
		t.Fatal("the failed batch moved the watermark")
	}
}

// TestRunnersOnSQLiteConvergeAndRebuildTheSameRows: the runtime and the
// projection on one SQLite file (the read models beside the log); runners
// in parallel fold every event once, and a rebuild gives the same rows.
func TestRunnersOnSQLiteConvergeAndRebuildTheSameRows(t *testing.T) {
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: filepath.Join(t.TempDir(), "shop.db"), Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{orderFlow()}, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	s := &shop{rt: rt}
	want := customerDoc{}
	for i := range 12 {
		id := "o-" + strconv.Itoa(i)
		s.place(t, id, "ada", i+1)
		s.decide(t, id, i%3 != 0)
		want.Orders++
		if i%3 != 0 {
			want.Shipped += i + 1
		}
	}
	newRunner := func() *projection.Runner {
		r, err := projection.New(st.Events, st.ReadModels, shopProjection())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		r := newRunner()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.CatchUp(context.Background())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := newRunner()
	if got := customer(t, r, "ada"); got != want {
		t.Fatalf("ada on SQLite: %+v, want %+v", got, want)
	}
	before := docsOf(append(rows(t, r, store.ReadModelQuery{Kind: "order"}), rows(t, r, store.ReadModelQuery{Kind: "customer"})...))
	if _, err := r.Rebuild(testCtx(t), "shop"); err != nil {
		t.Fatal(err)
	}
	after := docsOf(append(rows(t, r, store.ReadModelQuery{Kind: "order"}), rows(t, r, store.ReadModelQuery{Kind: "customer"})...))
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("rebuilt rows differ:\n%v\n%v", before, after)
	}
}
