package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// chromiumPath finds Debian's chromium. The browser test never skips: a
// machine without it fails, pointing at the script that installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed, and the inspector is tested in a real browser: run ./scripts/test.sh, " +
		"which installs Debian's chromium (apt-get install -y chromium) before the tests")
	return ""
}

// browser starts a headless Chromium with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox, // the test machine runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// shows is the condition that the state pane shows execution id at seq.
func shows(id string, seq int64) string {
	return fmt.Sprintf(`document.querySelector('#state-pane').dataset.execution === %q && document.querySelector('#state-pane').dataset.seq === '%d'`, id, seq)
}

// waitJS waits until a JavaScript expression is true, failing after d with
// what the page shows.
func waitJS(t *testing.T, ctx context.Context, what, expr string, d time.Duration) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(d))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, body)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// TestInspectorInBrowser runs `loom inspect` on a store a real runtime
// wrote and drives the page in headless Chromium: the list, a timeline, the
// slider moving the state pane back and forth in time, the typed error,
// the decision, the gate with who answered it, a fork and the branch refs,
// then a live update while another process appends to the log.
func TestInspectorInBrowser(t *testing.T) {
	bin, fx := setup(t)
	ctx := browser(t)
	path := copyStore(t, fx.path)
	log := readLog(t, path, "order-1")
	last := len(log) - 1

	srv := startLoom(t, bin, "inspect", "--store", path)
	url := inspectorURL(t, srv)

	run := runIn(t, ctx)
	run("open the page", chromedp.Navigate(url), chromedp.WaitVisible(`#executions li[data-id="order-1"]`))
	if refs := text(t, ctx, "#refs"); !strings.Contains(refs, "main → order-1") || !strings.Contains(refs, "what-if → order-1-what-if") {
		t.Fatalf("branch refs: %q", refs)
	}
	if list := text(t, ctx, "#executions"); !strings.Contains(list, "parked on approve") || !strings.Contains(list, "fork of order-1 @#") {
		t.Fatalf("execution list: %q", list)
	}

	run("select order-1", clickJS(`#executions li[data-id="order-1"] a`))
	waitJS(t, ctx, "the latest state of order-1", shows("order-1", int64(last))+` && document.querySelector('#state-status').textContent === 'completed'`, 20*time.Second)
	if n := countJS(t, ctx, `#timeline li`); n != len(log) {
		t.Fatalf("the timeline shows %d events, the log holds %d", n, len(log))
	}
	gates := text(t, ctx, "#gates")
	if !strings.Contains(gates, fmt.Sprintf("approve — parked at #%d", fx.parkAt)) || !strings.Contains(gates, `by {"user":"alice"}`) ||
		!strings.Contains(gates, `{"approved":true}`) || !strings.Contains(gates, "2026-01-05") {
		t.Fatalf("the gate pane does not say who answered and when: %q", gates)
	}
	if frames := text(t, ctx, "#frames"); !strings.Contains(frames, `typed error on out-of-stock: {"backorderDays":3,"item":"rare-tea"}`) ||
		!strings.Contains(frames, `"ch-14"`) {
		t.Fatalf("the frames pane: %q", frames)
	}
	if d := text(t, ctx, "#decisions"); !strings.Contains(d, "carrier") || !strings.Contains(d, `"dhl"`) {
		t.Fatalf("the decisions pane: %q", d)
	}

	// Move the slider: to the start, one step on, then back to the park.
	run("slider to the start", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.Home))
	waitJS(t, ctx, "the state at #0", shows("order-1", 0)+` && document.querySelector('#state-status').textContent === 'running'`, 10*time.Second)
	if f := text(t, ctx, "#frames"); !strings.Contains(f, "no step started yet") {
		t.Fatalf("frames at #0: %q", f)
	}
	if g := text(t, ctx, "#gates"); !strings.Contains(g, "no gate reached yet") {
		t.Fatalf("gates at #0: %q", g)
	}
	run("slider one step on", chromedp.KeyEvent(kb.ArrowRight))
	waitJS(t, ctx, "the state at #1", shows("order-1", 1)+` && document.querySelector('#frames').textContent.includes('quote')`, 10*time.Second)
	var keys []chromedp.Action[chromedp.Void]
	for range fx.parkAt - 1 {
		keys = append(keys, chromedp.KeyEvent(kb.ArrowRight))
	}
	run("slider to the park", keys...)
	waitJS(t, ctx, "the state at the park", shows("order-1", fx.parkAt)+` && document.querySelector('#state-status').textContent === 'suspended'`, 10*time.Second)
	if g := text(t, ctx, "#gates"); !strings.Contains(g, "waiting for an answer") {
		t.Fatalf("the gate at the park: %q", g)
	}
	if n := countJS(t, ctx, `#timeline li.future`); n != last-int(fx.parkAt) {
		t.Fatalf("%d timeline rows dimmed as future at the park, want %d", n, last-int(fx.parkAt))
	}

	// The fork: its lineage, its marker, and the other answer.
	run("open the fork", clickJS(`#executions li[data-id="order-1-what-if"] a`))
	forkLog := readLog(t, path, "order-1-what-if")
	waitJS(t, ctx, "the fork's latest state", shows("order-1-what-if", int64(len(forkLog)-1))+
		` && document.querySelector('#exec-header').dataset.execution === 'order-1-what-if'`, 20*time.Second)
	if l := text(t, ctx, "#exec-lineage"); !strings.Contains(l, fmt.Sprintf("forked from order-1 at #%d (simulation)", fx.parkAt)) {
		t.Fatalf("the fork's lineage: %q", l)
	}
	if f := text(t, ctx, "#forks"); !strings.Contains(f, "fork marker at #") {
		t.Fatalf("the forks pane: %q", f)
	}
	if g := text(t, ctx, "#gates"); !strings.Contains(g, `by {"user":"bob"}`) || !strings.Contains(g, `{"approved":false}`) {
		t.Fatalf("the fork's gate: %q", g)
	}
	if n := countJS(t, ctx, `#timeline li[data-type="__loom_fork__"]`); n != 1 {
		t.Fatalf("%d fork markers in the fork's timeline", n)
	}

	// A retry: the row says which attempt runs next, after what delay, and
	// why the last one failed.
	run("open the flaky order", clickJS(`#executions li[data-id="flaky-1"] a`))
	waitJS(t, ctx, "the retry row", `document.querySelector('#timeline li[data-type="STEP_RETRYING"]') !== null`, 20*time.Second)
	if row := text(t, ctx, `#timeline li[data-type="STEP_RETRYING"] .detail`); row != `flaky-step: attempt 2 in 250ms, after: "the warehouse timed out"` {
		t.Fatalf("the retry row: %q", row)
	}

	// Live: order-2 is parked; another process answers it while the page
	// watches, and the page follows the log to the end.
	run("open order-2", clickJS(`#executions li[data-id="order-2"] a`))
	parked := readLog(t, path, "order-2")
	waitJS(t, ctx, "order-2 parked", shows("order-2", int64(len(parked)-1))+` && document.querySelector('#live').classList.contains('on')`, 20*time.Second)
	before := countJS(t, ctx, `#timeline li`)
	a, err := openApp(path, newStepClock("2026-01-06T09:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	st, err := a.answer(actx, "order-2", "erin", true)
	cancel()
	if cerr := a.close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if st.Status != fold.StatusCompleted {
		t.Fatalf("order-2 ended %s", st.Status)
	}
	waitJS(t, ctx, "the live update",
		fmt.Sprintf(`document.querySelectorAll('#timeline li').length === %d && document.querySelector('#timeline li[data-type="EXECUTION_COMPLETED"]') !== null`+
			` && `+shows("order-2", st.Sequence)+` && document.querySelector('#state-status').textContent === 'completed'`+
			` && document.querySelector('#exec-status').textContent === 'completed'`, st.Sequence+1), 20*time.Second)
	if int64(before) >= st.Sequence+1 {
		t.Fatalf("the timeline did not grow: %d → %d", before, st.Sequence+1)
	}
	if g := text(t, ctx, "#gates"); !strings.Contains(g, `by {"user":"erin"}`) {
		t.Fatalf("the live gate: %q", g)
	}
	waitJS(t, ctx, "the list follows", `document.querySelector('#executions li[data-id="order-2"] .status').textContent === 'completed'`, 10*time.Second)

	// Back on order-1, just after the gate's answer, for the picture.
	run("order-1 again", clickJS(`#executions li[data-id="order-1"] a`))
	waitJS(t, ctx, "order-1 again", shows("order-1", int64(last)), 20*time.Second)
	var keysBack []chromedp.Action[chromedp.Void]
	keysBack = append(keysBack, chromedp.Focus("#seq"))
	for range int64(last) - fx.parkAt - 2 {
		keysBack = append(keysBack, chromedp.KeyEvent(kb.ArrowLeft))
	}
	run("slider to the answer", keysBack...)
	waitJS(t, ctx, "the answer", shows("order-1", fx.parkAt+2)+` && document.querySelector('#gates').textContent.includes('alice')`, 10*time.Second)
	updateDocsScreenshot(t, saveScreenshot(t, ctx, "inspector.png"))

	if err := srv.interrupt(t); err != nil {
		t.Fatalf("loom inspect after Ctrl-C: %v", err)
	}
}

// TestInspectorLivePanes drives the page in headless Chromium, never
// reloaded, while another process writes the store: a new execution's row
// appears in the list, and another's status moves there; a parked
// execution, selected with the slider at the end, is answered, and its row
// and the state pane move to the new state the page's watch sends;
// another, selected with the slider moved back, is answered, and the pane
// keeps the older state (while the header and the list move on) until the
// slider returns to the end.
func TestInspectorLivePanes(t *testing.T) {
	bin, fx := setup(t)
	ctx := browser(t)
	path := copyStore(t, fx.path)
	bulk := readLog(t, path, "bulk-00")

	srv := startLoom(t, bin, "inspect", "--store", path)
	url := inspectorURL(t, srv)

	run := runIn(t, ctx)
	run("open the page", chromedp.Navigate(url), chromedp.WaitVisible(`#executions li[data-id="order-1"]`))
	waitJS(t, ctx, "the live list", `document.querySelector('#executions').dataset.live === 'on'`, 20*time.Second)
	// A mark only this load of the page holds: a reload would drop it.
	run("mark the page", chromedp.Evaluate[chromedp.Void](`document.documentElement.dataset.loaded = 'once'`))
	if n := countJS(t, ctx, `#executions li[data-id="order-9"]`); n != 0 {
		t.Fatalf("order-9 is listed before it starts")
	}

	a, err := openApp(path, newStepClock("2026-01-07T09:00:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.close(); err != nil {
			t.Error(err)
		}
	}()
	actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// (a) A new execution: its row appears, parked, and the page stays
	// scrolled where it was.
	scrolled, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.scrollTo(0, (document.documentElement.scrollHeight - innerHeight) / 2); window.scrollY`))
	if err != nil || scrolled <= 0 {
		t.Fatalf("the page does not scroll (%d, %v): the scroll it keeps is not tested", scrolled, err)
	}
	if _, err := a.rt.Start(actx, flowOrder, order{Item: "matcha", Qty: 2}, loom.WithExecutionID("order-9")); err != nil {
		t.Fatal(err)
	}
	parked, err := a.rt.WaitForSettled(actx, "order-9")
	if err != nil || parked.Status != fold.StatusSuspended {
		t.Fatalf("order-9: %v %v", parked.Status, err)
	}
	row := func(id string) string { return fmt.Sprintf(`document.querySelector('#executions li[data-id=%q]')`, id) }
	waitJS(t, ctx, "the new row", row("order-9")+` !== null && `+row("order-9")+`.querySelector('.status').textContent === 'suspended'`+
		` && `+row("order-9")+`.textContent.includes('parked on approve')`, 20*time.Second)
	if y, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.scrollY`)); err != nil || y != scrolled {
		t.Fatalf("the list moved the page from %d to %d (%v)", scrolled, y, err)
	}
	// An execution the page never selected (nor watched) moves in the list.
	other, err := a.answer(actx, "bulk-01", "grace", false)
	if err != nil || other.Status != fold.StatusCompleted {
		t.Fatalf("bulk-01: %v %v", other.Status, err)
	}
	waitJS(t, ctx, "bulk-01 completed in the list", row("bulk-01")+`.querySelector('.status').textContent === 'completed'`+
		fmt.Sprintf(` && `+row("bulk-01")+`.textContent.includes('%d events')`, other.Sequence+1), 20*time.Second)

	// (b) Selected at the end, bulk-00 is answered: the list and the state
	// pane follow it to its end, the pane from the watch.
	run("select bulk-00", clickJS(`#executions li[data-id="bulk-00"] a`))
	waitJS(t, ctx, "bulk-00 parked, watched", shows("bulk-00", int64(len(bulk)-1))+
		` && document.querySelector('#state-status').textContent === 'suspended' && document.querySelector('#state-pane').dataset.live === 'on'`, 20*time.Second)
	done, err := a.answer(actx, "bulk-00", "grace", true)
	if err != nil || done.Status != fold.StatusCompleted {
		t.Fatalf("bulk-00: %v %v", done.Status, err)
	}
	waitJS(t, ctx, "bulk-00 completed in the list and the pane", row("bulk-00")+`.querySelector('.status').textContent === 'completed'`+
		fmt.Sprintf(` && document.querySelector('#state-pane').dataset.watched === '%d'`, done.Sequence)+
		` && `+shows("bulk-00", done.Sequence)+` && document.querySelector('#state-status').textContent === 'completed'`+
		` && document.querySelector('#gates').textContent.includes('"grace"')`+
		` && document.querySelector('#executions a.selected').dataset.id === 'bulk-00'`, 20*time.Second)

	// (c) Selected with the slider moved back, order-9 is answered: the
	// header and the list move on, the pane stays where the slider is
	// until it returns to the end.
	run("select order-9", clickJS(`#executions li[data-id="order-9"] a`))
	waitJS(t, ctx, "order-9 parked, watched", shows("order-9", parked.Sequence)+
		` && document.querySelector('#state-pane').dataset.live === 'on'`, 20*time.Second)
	run("slider one step back", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.ArrowLeft))
	waitJS(t, ctx, "the state before the park", shows("order-9", parked.Sequence-1)+
		` && document.querySelector('#follow-note').textContent.startsWith('time-travelling')`, 10*time.Second)
	end, err := a.answer(actx, "order-9", "heidi", true)
	if err != nil || end.Status != fold.StatusCompleted {
		t.Fatalf("order-9: %v %v", end.Status, err)
	}
	waitJS(t, ctx, "order-9 completed, the pane kept", fmt.Sprintf(`document.querySelector('#state-pane').dataset.watched === '%d'`, end.Sequence)+
		fmt.Sprintf(` && document.querySelectorAll('#timeline li').length === %d`, end.Sequence+1)+
		` && document.querySelector('#exec-status').textContent === 'completed'`+
		` && `+row("order-9")+`.querySelector('.status').textContent === 'completed'`+
		` && `+shows("order-9", parked.Sequence-1), 20*time.Second)
	if st := text(t, ctx, "#state-status"); st != "running" {
		t.Fatalf("the pane before the park shows %q", st)
	}
	run("slider to the end", chromedp.KeyEvent(kb.End))
	waitJS(t, ctx, "order-9's end", shows("order-9", end.Sequence)+` && document.querySelector('#state-status').textContent === 'completed'`+
		` && document.querySelector('#follow-note').textContent === 'following the log'`, 10*time.Second)
	if g := text(t, ctx, "#gates"); !strings.Contains(g, `by {"user":"heidi"}`) {
		t.Fatalf("order-9's gate: %q", g)
	}
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.dataset.loaded || ''`)); err != nil || mark != "once" {
		t.Fatalf("the page was reloaded: mark %q, %v", mark, err)
	}
	if n := countJS(t, ctx, `#list-note:not([hidden]), #state-note:not([hidden])`); n != 0 {
		t.Fatalf("%d panes say they are not live", n)
	}
	saveScreenshot(t, ctx, "inspector-live.png")

	if err := srv.interrupt(t); err != nil {
		t.Fatalf("loom inspect after Ctrl-C: %v", err)
	}
}

// TestInspectorNotLive: over a store that cannot follow a log (the watch
// and the log tail answer 501) the page falls back to fetching: the state
// pane shows the state it fetched, says it is not live, and raises no
// error, while the list, which needs no follower, stays live.
func TestInspectorNotLive(t *testing.T) {
	ctx := browser(t)
	events := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{orderFlow()}, ResumeAuthenticator: approver{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	}()
	actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := rt.Start(actx, flowOrder, order{Item: "sencha", Qty: 1}, loom.WithExecutionID("solo")); err != nil {
		t.Fatal(err)
	}
	parked, err := rt.WaitForSettled(actx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	type logOnly struct{ store.EventStore } // no store.Subscriber, and no Follow
	in, err := inspect.New(inspect.Source{Events: logOnly{events}}, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	defer in.Close() // first: the server's Close waits for the list's stream

	run := runIn(t, ctx)
	run("open the page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(`#executions li[data-id="solo"]`),
		chromedp.Evaluate[chromedp.Void](`window.pageErrors = []; window.addEventListener('error', (e) => pageErrors.push(String(e.message)));`+
			` window.addEventListener('unhandledrejection', (e) => pageErrors.push(String(e.reason)));`))
	run("select solo", clickJS(`#executions li[data-id="solo"] a`))
	waitJS(t, ctx, "solo's state, not live", shows("solo", parked.Sequence)+` && document.querySelector('#state-status').textContent === 'suspended'`+
		` && document.querySelector('#state-pane').dataset.live === 'off' && !document.querySelector('#state-note').hidden`+
		` && document.querySelector('#state-note').textContent === 'not live'`, 20*time.Second)
	payload, _ := json.Marshal(approval{Approved: true})
	if err := rt.Resume(actx, "solo", loom.ResumeEvent{EventType: gate, Payload: payload, Credentials: json.RawMessage(`{"user":"ivan"}`)}); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.WaitForSettled(actx, "solo"); err != nil || st.Status != fold.StatusCompleted {
		t.Fatalf("solo: %v %v", st.Status, err)
	}
	waitJS(t, ctx, "the live list", `document.querySelector('#executions li[data-id="solo"] .status').textContent === 'completed'`, 20*time.Second)
	if errs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`pageErrors`)); err != nil || len(errs) != 0 {
		t.Fatalf("the page raised errors: %v %v", errs, err)
	}
}

// clickJS clicks the element sel finds from inside the page, in one step:
// the list re-renders as the log grows, and a click through DevTools can
// hold a node the page has just replaced.
func clickJS(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

func countJS(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// saveScreenshot keeps a PNG of the page as a test artifact named name (go
// test -artifacts keeps it; its path is logged) and returns it.
func saveScreenshot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return png
}

// updateDocsScreenshot refreshes docs/inspector.png with png when
// LOOM_UPDATE_SCREENSHOT=1.
func updateDocsScreenshot(t *testing.T, png []byte) {
	t.Helper()
	updateDocsImage(t, "inspector.png", png)
}

// updateDocsImage refreshes docs/<name> with png when
// LOOM_UPDATE_SCREENSHOT=1: the screenshots the README shows are the
// tests' own.
func updateDocsImage(t *testing.T, name string, png []byte) {
	t.Helper()
	if os.Getenv("LOOM_UPDATE_SCREENSHOT") == "1" {
		docs := filepath.Join("..", "..", "docs", name)
		if err := os.WriteFile(docs, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", docs)
	}
}

// runIn returns a runner of chromedp actions in the browser ctx, each call
// bounded by 30 s and failing the test with what it was doing.
func runIn(t *testing.T, ctx context.Context) func(what string, actions ...chromedp.Action[chromedp.Void]) {
	return func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(tctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// inspectorURL reads the loopback URL loom inspect prints once it serves.
func inspectorURL(t *testing.T, srv *background) string {
	t.Helper()
	line := srv.waitLine(t, "Inspecting ", 30*time.Second)
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) \(read-only`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no loopback URL in %q", line)
	}
	return m[1]
}
