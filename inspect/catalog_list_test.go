package inspect_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/loomtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// listBody is the body of /api/executions.
type listBody struct {
	Executions []inspect.Listing `json:"executions"`
	Next       string            `json:"next"`
	Order      string            `json:"order"`
	Counts     map[string]int64  `json:"counts"`
}

// fleet is a store of executions of two flows and two tenants, started a
// minute apart on an injected clock, some parked and some ended.
type fleet struct {
	events *memstore.EventStore
	src    inspect.Source
}

// fleetStarts are the executions of newFleet, oldest first: id, flow,
// tenant, and what ends it (park: it stays parked on "more").
var fleetStarts = []struct{ id, flow, tenant, end string }{
	{"order-1", "orders", "acme", "park"},
	{"order-2", "orders", "bolt", "done"},
	{"invoice-1", "invoices", "acme", "done"},
	{"order-3", "orders", "acme", "cancel"},
	{"invoice-2", "invoices", "", "park"},
	{"order-10", "orders", "bolt", "park"},
}

func newFleet(t *testing.T) fleet {
	t.Helper()
	body := func(ctx *loom.Context, n int) (int, error) {
		if n == 0 {
			return loom.Suspend[int](ctx, "more")
		}
		return n, nil
	}
	clock := loomtest.NewClock(time.Time{})
	events := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: events, Clock: clock,
		Flows: []*loom.Flow{loom.NewFlow("orders", body), loom.NewFlow("invoices", body)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	for _, x := range fleetStarts {
		clock.Advance(time.Minute)
		ctx := context.Background()
		if x.tenant != "" {
			ctx = loom.WithPrincipal(ctx, map[string]string{"tenant": x.tenant, "subject": "ops"})
		}
		input := 1
		if x.end != "done" {
			input = 0
		}
		if _, err := rt.Start(ctx, x.flow, input, loom.WithExecutionID(x.id)); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.WaitForSettled(ctx, x.id); err != nil {
			t.Fatal(err)
		}
		if x.end == "cancel" {
			if err := rt.Cancel(ctx, x.id, "no longer wanted"); err != nil {
				t.Fatal(err)
			}
		}
	}
	return fleet{events: events, src: inspect.Source{Events: events}}
}

// getList gets a page of /api/executions with its counts (?counts=1).
func getList(t *testing.T, srvURL string, q url.Values) listBody {
	t.Helper()
	return getListAt(t, srvURL, "/api/executions", withCounts(q))
}

func withCounts(q url.Values) url.Values {
	out := url.Values{"counts": {"1"}}
	for k, v := range q { //loom:order-independent a copy
		out[k] = v
	}
	return out
}

func getListAt(t *testing.T, srvURL, path string, q url.Values) listBody {
	t.Helper()
	resp, err := http.Get(srvURL + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b listBody
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/executions?%s: %d", q.Encode(), resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func idsOf(ls []inspect.Listing) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.ExecutionID
	}
	return ids
}

// TestListFromTheCatalog: over a store that keeps a store.ExecutionCatalog
// the list is newest start first, each execution with its folded status,
// start and update times and tenant; search by id prefix and the filters
// by status, flow and tenant select in the store, combine, and come with
// the counts by status of what the prefix, flow and tenant select.
func TestListFromTheCatalog(t *testing.T) {
	f := newFleet(t)
	_, srv := serve(t, f.src, inspect.Options{})
	all := getList(t, srv.URL, url.Values{})
	if all.Order != inspect.OrderRecent {
		t.Fatalf("order %q, want %q", all.Order, inspect.OrderRecent)
	}
	want := []string{"order-10", "invoice-2", "order-3", "invoice-1", "order-2", "order-1"}
	if got := idsOf(all.Executions); !slices.Equal(got, want) {
		t.Fatalf("the list is %v, want newest first %v", got, want)
	}
	for i, l := range all.Executions {
		x := fleetStarts[len(fleetStarts)-1-i]
		wantStatus := map[string]fold.Status{"park": fold.StatusSuspended, "done": fold.StatusCompleted, "cancel": fold.StatusCancelled}[x.end]
		if l.Status != wantStatus || l.WorkflowID != x.flow || l.Tenant != x.tenant || l.StartedAt == 0 || l.UpdatedAt < l.StartedAt {
			t.Fatalf("listing %+v, want status %s, flow %s, tenant %q, startedAt ≤ updatedAt", l, wantStatus, x.flow, x.tenant)
		}
		if i > 0 && l.StartedAt >= all.Executions[i-1].StartedAt {
			t.Fatalf("%s started at %d, not before %s at %d", l.ExecutionID, l.StartedAt, all.Executions[i-1].ExecutionID, all.Executions[i-1].StartedAt)
		}
	}
	if want := map[string]int64{"suspended": 3, "completed": 2, "cancelled": 1}; !mapsEqual(all.Counts, want) {
		t.Fatalf("counts %v, want %v", all.Counts, want)
	}
	// The counts cost a pass: only asked for, or on their own.
	if plain := getListAt(t, srv.URL, "/api/executions", url.Values{}); plain.Counts != nil || !slices.Equal(idsOf(plain.Executions), want) {
		t.Fatalf("without ?counts=1: counts %v, %v", plain.Counts, idsOf(plain.Executions))
	}
	if only := getListAt(t, srv.URL, "/api/executions/counts", url.Values{"tenant": {"acme"}}); only.Order != inspect.OrderRecent ||
		!mapsEqual(only.Counts, map[string]int64{"suspended": 1, "completed": 1, "cancelled": 1}) {
		t.Fatalf("/api/executions/counts?tenant=acme: %+v", only)
	}
	for _, tc := range []struct {
		q      url.Values
		want   []string
		counts map[string]int64
	}{
		{url.Values{"status": {"suspended"}}, []string{"order-10", "invoice-2", "order-1"}, map[string]int64{"suspended": 3, "completed": 2, "cancelled": 1}},
		{url.Values{"q": {"order-1"}}, []string{"order-10", "order-1"}, map[string]int64{"suspended": 2}},
		{url.Values{"flow": {"invoices"}}, []string{"invoice-2", "invoice-1"}, map[string]int64{"suspended": 1, "completed": 1}},
		{url.Values{"tenant": {"acme"}}, []string{"order-3", "invoice-1", "order-1"}, map[string]int64{"suspended": 1, "completed": 1, "cancelled": 1}},
		{url.Values{"tenant": {"bolt"}, "status": {"suspended"}, "flow": {"orders"}, "q": {"order"}}, []string{"order-10"}, map[string]int64{"suspended": 1, "completed": 1}},
		{url.Values{"q": {"nothing"}}, []string{}, nil},
	} {
		got := getList(t, srv.URL, tc.q)
		if ids := idsOf(got.Executions); !slices.Equal(ids, tc.want) || !mapsEqual(got.Counts, tc.counts) {
			t.Fatalf("?%s: %v with counts %v, want %v with %v", tc.q.Encode(), ids, got.Counts, tc.want, tc.counts)
		}
	}
	// Paged two at a time, the same list.
	var paged []string
	q := url.Values{"limit": {"2"}}
	for range len(want) {
		page := getList(t, srv.URL, q)
		paged = append(paged, idsOf(page.Executions)...)
		if page.Next == "" {
			break
		}
		q.Set("after", page.Next)
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged by two: %v, want %v", paged, want)
	}
}

// plainEvents hides the catalog of the store it wraps.
type plainEvents struct{ store.EventStore }

// TestListWithoutACatalog: over a store without a catalog the list is the
// store's listing in id order, the filters select within each page (so
// the cursor still pages the store), and there are no counts.
func TestListWithoutACatalog(t *testing.T) {
	f := newFleet(t)
	_, srv := serve(t, inspect.Source{Events: plainEvents{f.events}}, inspect.Options{})
	all := getList(t, srv.URL, url.Values{})
	want := []string{"invoice-1", "invoice-2", "order-1", "order-10", "order-2", "order-3"}
	if got := idsOf(all.Executions); all.Order != inspect.OrderID || !slices.Equal(got, want) || all.Counts != nil {
		t.Fatalf("order %q, %v, counts %v; want %q, %v, none", all.Order, got, all.Counts, inspect.OrderID, want)
	}
	page := getList(t, srv.URL, url.Values{"limit": {"3"}, "status": {"suspended"}})
	if got := idsOf(page.Executions); !slices.Equal(got, []string{"invoice-2", "order-1"}) || page.Next != "order-1" {
		t.Fatalf("a filtered page of three: %v, next %q; want the suspended of the first three, next order-1", got, page.Next)
	}
	rest := getList(t, srv.URL, url.Values{"limit": {"3"}, "status": {"suspended"}, "after": {page.Next}})
	if got := idsOf(rest.Executions); !slices.Equal(got, []string{"order-10"}) {
		t.Fatalf("the next filtered page: %v, want [order-10]", got)
	}
}

// TestListRefusals: a status that is none, and a cursor no list answered,
// are refused with a JSON error that says what to pass.
func TestListRefusals(t *testing.T) {
	f := newFleet(t)
	_, srv := serve(t, f.src, inspect.Options{})
	for _, q := range []string{"status=done", "status=Running", "after=order-1", "limit=-2"} {
		code, body := getBody(t, srv, "/api/executions?"+q)
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); code != http.StatusBadRequest || err != nil || e.Error == "" {
			t.Fatalf("?%s: %d %s, want 400 with an error", q, code, body)
		}
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a { //loom:order-independent each entry compared on its own
		if b[k] != v {
			return false
		}
	}
	return true
}

// emptyCatalog is a store that could keep a catalog but holds none, as a
// read-only view of a file written before it had one answers.
type emptyCatalog struct{ store.EventStore }

func (emptyCatalog) SearchExecutions(context.Context, store.CatalogQuery) (store.CatalogPage, error) {
	return store.CatalogPage{}, store.ErrNoCatalog
}

func (emptyCatalog) CountExecutions(context.Context, store.CatalogQuery) (store.CatalogCounts, error) {
	return nil, store.ErrNoCatalog
}

// TestListOverAStoreWithoutItsCatalog: a store that refuses its catalog
// with store.ErrNoCatalog is listed as one without a catalog, id order and
// id cursors included, never as an error or an empty list.
func TestListOverAStoreWithoutItsCatalog(t *testing.T) {
	f := newFleet(t)
	_, srv := serve(t, inspect.Source{Events: emptyCatalog{f.events}}, inspect.Options{})
	page := getList(t, srv.URL, url.Values{"limit": {"4"}})
	if got := idsOf(page.Executions); page.Order != inspect.OrderID || !slices.Equal(got, []string{"invoice-1", "invoice-2", "order-1", "order-10"}) || page.Next != "order-10" {
		t.Fatalf("order %q, %v, next %q; want the listing's first four", page.Order, got, page.Next)
	}
	rest := getList(t, srv.URL, url.Values{"after": {page.Next}})
	if got := idsOf(rest.Executions); !slices.Equal(got, []string{"order-2", "order-3"}) {
		t.Fatalf("after order-10: %v", got)
	}
}
