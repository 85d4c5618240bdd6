package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/loomtest"
	"github.com/loom-kernel/loom/plugins/sqlite"
)

// listFleet is the store of the list tests: executions of two flows and
// two tenants, started a minute apart, oldest first: id, flow, tenant, and
// how it ends (park: parked on "more").
var listFleet = []struct{ id, flow, tenant, end string }{
	{"order-1", "orders", "acme", "park"},
	{"order-2", "orders", "bolt", "done"},
	{"invoice-1", "invoices", "acme", "done"},
	{"order-3", "orders", "acme", "cancel"},
	{"invoice-2", "invoices", "", "park"},
	{"order-10", "orders", "bolt", "park"},
	{"invoice-3", "invoices", "bolt", "fail"},
}

var errListFleet = errors.New("this invoice fails on purpose")

// listApp is a runtime of the list fleet's flows over the SQLite file at
// path, its clock at start.
func listApp(t *testing.T, path string, clock *loomtest.Clock) (*loom.Runtime, func()) {
	t.Helper()
	body := func(ctx *loom.Context, n int) (int, error) {
		switch n {
		case 0:
			return loom.Suspend[int](ctx, "more")
		case 2:
			return 0, errListFleet
		}
		return n, nil
	}
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Clock: clock, StickyParks: -1,
		Flows: []*loom.Flow{loom.NewFlow("orders", body), loom.NewFlow("invoices", body)}})
	if err != nil {
		t.Fatal(err)
	}
	return rt, func() {
		if err := errors.Join(rt.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	}
}

// startFleet starts x on rt and waits until it settles (cancelled, for
// "cancel").
func startFleet(t *testing.T, rt *loom.Runtime, id, flow, tenant, end string) {
	t.Helper()
	ctx := context.Background()
	if tenant != "" {
		ctx = loom.WithPrincipal(ctx, map[string]string{"tenant": tenant, "subject": "ops"})
	}
	input := map[string]int{"park": 0, "cancel": 0, "done": 1, "fail": 2}[end]
	if _, err := rt.Start(ctx, flow, input, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSettled(ctx, id); err != nil {
		t.Fatal(err)
	}
	if end == "cancel" {
		if err := rt.Cancel(ctx, id, "no longer wanted"); err != nil {
			t.Fatal(err)
		}
	}
}

// listIDs is the ids the list shows, top to bottom.
const listIDs = `Array.from(document.querySelectorAll('#executions li[data-id]')).map(li => li.dataset.id).join(',')`

// waitList waits until the list shows exactly ids, in order.
func waitList(t *testing.T, ctx context.Context, what string, ids ...string) {
	t.Helper()
	waitJS(t, ctx, what, fmt.Sprintf(`%s === %q`, listIDs, strings.Join(ids, ",")), 20*time.Second)
}

// TestInspectorListInBrowser: `loom inspect` over a SQLite file lists its
// executions newest first with their counts by status; searching by id
// prefix, filtering by status, flow and tenant (from the keyboard too, and
// by a count), each narrows the list in the store and shows in the
// address, so a reload keeps it; each row says when it started (the
// recorded instant on hover) and how long it ran; and an execution the
// app starts while the page is open appears at the top without a reload.
func TestInspectorListInBrowser(t *testing.T) {
	bin, _ := setup(t)
	path := filepath.Join(t.TempDir(), "fleet.db")
	clock := loomtest.NewClock(time.Time{})
	rt, closeApp := listApp(t, path, clock)
	for _, x := range listFleet {
		clock.Advance(time.Minute)
		startFleet(t, rt, x.id, x.flow, x.tenant, x.end)
	}
	defer closeApp()

	ctx := browser(t)
	srv := startLoom(t, bin, "inspect", "--store", path)
	url := inspectorURL(t, srv)
	run := runIn(t, ctx)
	run("open the page", chromedp.Navigate(url))
	all := []string{"invoice-3", "order-10", "invoice-2", "order-3", "invoice-1", "order-2", "order-1"}
	waitList(t, ctx, "the list, newest first", all...)
	if got := text(t, ctx, "#list-counts"); got != "all 7\nsuspended 3\ncompleted 2\nfailed 1\ncancelled 1" {
		t.Fatalf("the counts say %q", got)
	}
	if got := text(t, ctx, "#list-order"); got != "newest first" {
		t.Fatalf("the order note says %q", got)
	}
	// Times: the start, relative, with the recorded instant on hover; how
	// long an ended one took, from its recorded events.
	row := `#executions li[data-id="order-2"]`
	title := evalJS[string](t, ctx, `document.querySelector('`+row+` time').title`)
	if !strings.HasPrefix(title, "2026-01-01 00:02:00") {
		t.Fatalf("order-2's start on hover is %q, want its recorded instant 2026-01-01 00:02:00", title)
	}
	if got := text(t, ctx, row+" .times"); !strings.Contains(got, "started ") || !strings.Contains(got, " ago") || !strings.Contains(got, "took 0s") {
		t.Fatalf("order-2's times: %q", got)
	}
	if got := text(t, ctx, `#executions li[data-id="order-1"] .times`); !strings.Contains(got, "parked, ") {
		t.Fatalf("order-1's times: %q", got)
	}
	if got := text(t, ctx, `#executions li[data-id="invoice-1"] .meta`); !strings.Contains(got, "tenant acme") {
		t.Fatalf("invoice-1's line: %q", got)
	}

	// Search by id prefix, typed.
	run("search order-1", chromedp.SendKeys("#f-q", "order-1"))
	waitList(t, ctx, "the executions whose id starts with order-1", "order-10", "order-1")
	waitJS(t, ctx, "the search in the address", `new URLSearchParams(location.search).get('q') === 'order-1'`, 10*time.Second)
	if got := text(t, ctx, "#list-counts"); got != "all 2\nsuspended 2" {
		t.Fatalf("the counts of the search say %q", got)
	}
	run("clear the search", setInput("#f-q", ""))
	waitList(t, ctx, "the whole list again", all...)

	// A count filters by its status, and says it is pressed.
	run("press the suspended count", clickJS(`#list-counts button[data-status="suspended"]`))
	waitList(t, ctx, "the suspended executions", "order-10", "invoice-2", "order-1")
	waitJS(t, ctx, "the suspended count pressed", `document.querySelector('#list-counts button[data-status="suspended"]').getAttribute('aria-pressed') === 'true' && document.querySelector('#f-status').value === 'suspended'`, 10*time.Second)

	// The flow and the tenant, from the keyboard: focus, type, Enter.
	run("filter by flow", chromedp.Focus("#f-flow"), chromedp.KeyEvent("orders"), chromedp.KeyEvent(kb.Enter))
	waitList(t, ctx, "the suspended orders", "order-10", "order-1")
	run("filter by tenant", chromedp.Focus("#f-tenant"), chromedp.KeyEvent("bolt"), chromedp.KeyEvent(kb.Enter))
	waitList(t, ctx, "the suspended orders of bolt", "order-10")
	run("open the one left", clickJS(`#executions li[data-id="order-10"] a`))
	waitJS(t, ctx, "order-10's view", shows("order-10", 1), 20*time.Second)
	updateDocsImage(t, "inspector-list.png", saveScreenshot(t, ctx, "inspector-list-filtered.png"))

	// A reload keeps the filters: they live in the address.
	run("reload", chromedp.Reload())
	waitList(t, ctx, "the same list after a reload", "order-10")
	flow, tenant := evalJS[string](t, ctx, `document.querySelector('#f-flow').value`), evalJS[string](t, ctx, `document.querySelector('#f-tenant').value`)
	status := evalJS[string](t, ctx, `document.querySelector('#f-status').value`)
	if flow != "orders" || tenant != "bolt" || status != "suspended" {
		t.Fatalf("after a reload the filters are flow %q, tenant %q, status %q", flow, tenant, status)
	}
	run("a filter nothing matches", setInput("#f-tenant", "nobody"))
	waitJS(t, ctx, "the empty list says why", `document.querySelector('#executions').innerText.includes('no execution matches the filters')`, 20*time.Second)

	// Live: an execution the app starts now appears at the top.
	run("back to every execution", chromedp.Navigate(url))
	waitList(t, ctx, "the whole list", all...)
	clock.Advance(time.Minute)
	startFleet(t, rt, "order-11", "orders", "acme", "park")
	waitList(t, ctx, "the new execution at the top, without a reload", append([]string{"order-11"}, all...)...)
	waitJS(t, ctx, "its count", `document.querySelector('#list-counts').innerText.includes('suspended 4')`, 20*time.Second)
}

// setInput sets the value of the input sel finds as typing would: the
// page hears an input event.
func setInput(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(i => { i.value = %q; i.dispatchEvent(new Event('input')); })(document.querySelector(%q))`, value, sel))
}
