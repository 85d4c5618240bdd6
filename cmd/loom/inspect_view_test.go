package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The execution view as an operations tool (issue 20, point 2), each
// feature driven in headless Chromium over memory stores that real
// runtimes wrote. What the page shows is checked against the recorded log:
// times and durations come from its timestamps, never a clock.

// viewWorld is a runtime over memory stores and the inspector serving them.
type viewWorld struct {
	url    string
	events *memstore.EventStore
}

// retryDelay is the recorded backoff of the step that keeps failing.
const retryDelay = 90 * time.Second

// newViewWorld runs every execution the view's tests open:
//
//   - order-1: the shop order (a typed failure, a decision, a gate answered
//     by alice), and order-1-what-if, its simulated fork answered by bob;
//   - long-1: forty steps, parked, then cancelled;
//   - flaky-1: a clock reading and a step that succeeds on its retry;
//   - clock-1: a clock reading, a random seed and an application decision;
//   - broken-1: a typed failure with a code, then an untyped one that fails
//     the execution;
//   - retrying-1: running, its step failed once and waiting 90 s to retry;
//   - timed-1: parked on a gate with a timeout and a correlation key;
//   - family, parked awaiting its child family/kid, parked on a gate.
func newViewWorld(t *testing.T) *viewWorld {
	t.Helper()
	events := memstore.NewEventStore()
	snaps, refs := memstore.NewSnapshotStore(), memstore.NewBranchRegistry()
	sleeping := make(chan struct{}, 1)
	rt, err := loom.New(loom.Config{Events: events, Snapshots: snaps, Branches: refs, Timers: memstore.NewTimerStore(),
		Flows:     append([]*loom.Flow{orderFlow(), flakyFlow()}, viewFlows(sleeping)...),
		Clock:     newStepClock("2026-01-05T09:00:00Z"),
		TimerPoll: time.Hour, ResumeAuthenticator: approver{}, Features: loom.Features{Children: true},
		Logger: slog.New(slog.DiscardHandler)}) // retrying-1's drive is cut short at Close, and says so
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := func(id, flow string, in any) {
		t.Helper()
		if _, err := rt.Start(ctx, flow, in, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(id string) {
		t.Helper()
		if _, err := rt.WaitForSettled(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id, who string, approved bool) {
		t.Helper()
		payload, _ := json.Marshal(approval{Approved: approved})
		cred, _ := json.Marshal(map[string]string{"user": who})
		if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: payload, Credentials: cred}); err != nil {
			t.Fatal(err)
		}
		settle(id)
	}

	start("order-1", flowOrder, order{Item: "rare-tea", Qty: 2})
	parked, err := rt.WaitForSuspend(ctx, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	answer("order-1", "alice", true)
	if _, err := rt.Fork(ctx, "order-1", parked.Sequence, loom.ForkID("order-1-what-if"), loom.SimulateFork()); err != nil {
		t.Fatal(err)
	}
	answer("order-1-what-if", "bob", false)
	start("long-1", "ops.long", 40)
	if _, err := rt.WaitForSuspend(ctx, "long-1"); err != nil {
		t.Fatal(err)
	}
	if err := rt.Cancel(ctx, "long-1", "the operator stopped it"); err != nil {
		t.Fatal(err)
	}
	settle("long-1")
	for _, x := range [][2]string{{"flaky-1", flowFlaky}, {"clock-1", "ops.clock"}, {"broken-1", "ops.broken"}, {"timed-1", "ops.timed"}} {
		start(x[0], x[1], 21)
		settle(x[0])
	}
	start("family", "family", nil)
	for _, id := range []string{"family", "family/kid"} {
		if _, err := rt.WaitForSuspend(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	start("retrying-1", "ops.retrying", 1)
	select {
	case <-sleeping: // its STEP_RETRYING is durable: the step is non-idempotent
	case <-ctx.Done():
		t.Fatal("retrying-1 never failed its first attempt")
	}

	in, err := inspect.New(inspect.Source{Events: events, Snapshots: snaps, Branches: refs}, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: the server's Close waits for the page's streams
	return &viewWorld{url: srv.URL + "/", events: events}
}

// viewFlows are the flows of newViewWorld beyond the CLI fixture's; the
// retrying one signals sleeping when its step waits to retry.
func viewFlows(sleeping chan<- struct{}) []*loom.Flow {
	long := loom.NewFlow("ops.long", func(ctx *loom.Context, n int) (int, error) {
		for i := range n {
			step := loom.NewStep(fmt.Sprintf("step-%02d", i), func(_ context.Context, x int) (int, error) { return x + 1, nil })
			if _, err := loom.Run(ctx, step, i); err != nil {
				return 0, err
			}
		}
		a, err := loom.Suspend[approval](ctx, gate)
		if err != nil || !a.Approved {
			return 0, err
		}
		return n, nil
	})
	clock := loom.NewFlow("ops.clock", func(ctx *loom.Context, n int) (int, error) {
		_ = loom.Now(ctx)
		roll := loom.Random(ctx).IntN(6)
		pick, err := loom.Decide(ctx, "pick", func() (string, error) { return "left", nil })
		if err != nil {
			return 0, err
		}
		return n + roll + len(pick), nil
	})
	reserve := loom.NewStep("reserve", func(_ context.Context, n int) (int, error) {
		return 0, loom.Fail("quota", map[string]any{"code": "RATE_LIMITED", "message": "slow down"})
	}, loom.ErrorChannel("quota", `{"type":"object","required":["code"]}`))
	chargeCard := loom.NewStep("charge-card", func(_ context.Context, n int) (string, error) {
		return "", errors.New(`card "4242" declined: <insufficient funds>`)
	})
	broken := loom.NewFlow("ops.broken", func(ctx *loom.Context, n int) (string, error) {
		if _, err := loom.Run(ctx, reserve, n); err == nil {
			return "", errors.New("the quota let it through")
		}
		return loom.Run(ctx, chargeCard, n)
	})
	failing := loom.NewStep("reserve", func(_ context.Context, n int) (int, error) {
		return 0, errors.New("the warehouse is down")
	}, loom.NonIdempotent(), loom.WithRetry(middleware.RetryPolicy{MaxAttempts: 5,
		Backoff: func(int64) time.Duration { return retryDelay },
		Sleep: func(ctx context.Context, _ time.Duration) error {
			select {
			case sleeping <- struct{}{}:
			default:
			}
			<-ctx.Done() // until the runtime closes
			return ctx.Err()
		}}))
	retrying := loom.NewFlow("ops.retrying", func(ctx *loom.Context, n int) (int, error) { return loom.Run(ctx, failing, n) })
	timed := loom.NewFlow("ops.timed", func(ctx *loom.Context, _ int) (bool, error) {
		a, err := loom.Suspend[approval](ctx, gate, loom.Timeout(24*time.Hour), loom.CorrelationKey("po-7"))
		return a.Approved, err
	}, loom.WithResumeSchema(gate, approveSchema))
	kid := loom.NewFlow("kid", func(c *loom.Context, _ struct{}) (int, error) { return loom.Suspend[int](c, "release") })
	family := loom.NewFlow("family", func(c *loom.Context, _ struct{}) (int, error) {
		k, err := loom.SpawnChild(c, "kid", "kid", nil)
		if err != nil {
			return 0, err
		}
		return loom.AwaitChildTyped[int](c, k)
	})
	return []*loom.Flow{long, clock, broken, retrying, timed, kid, family}
}

func (w *viewWorld) log(t *testing.T, id string) []event.Envelope {
	t.Helper()
	evs, err := store.Read(context.Background(), w.events, id)
	if err != nil || len(evs) == 0 {
		t.Fatalf("the log of %s: %d events, %v", id, len(evs), err)
	}
	return evs
}

// openView starts a browser on the inspector at execution id (the address
// #/x/<id>, or #/x/<id>@<at> when at is not empty) and waits until the
// state pane shows it at seq.
func openView(t *testing.T, w *viewWorld, id, at string, seq int64) context.Context {
	t.Helper()
	ctx := browser(t)
	addr := w.url + "#/x/" + url.PathEscape(id)
	if at != "" {
		addr += "@" + at
	}
	runIn(t, ctx)("open "+addr, chromedp.Navigate(addr))
	waitJS(t, ctx, "the view of "+id, shows(id, seq)+fmt.Sprintf(` && document.querySelector('#exec-header').dataset.execution === %q`, id)+
		` && document.querySelectorAll('#timeline li').length > 0 && document.querySelectorAll('#gantt li').length > 0`, 20*time.Second)
	return ctx
}

// goTo opens another execution in the page, by its address.
func goTo(t *testing.T, ctx context.Context, id string, seq int64) {
	t.Helper()
	runIn(t, ctx)("go to "+id, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = '#/x/' + encodeURIComponent(%q)`, id)))
	waitJS(t, ctx, "the view of "+id, shows(id, seq)+fmt.Sprintf(` && document.querySelector('#exec-header').dataset.execution === %q`, id), 20*time.Second)
}

// screenshot keeps a PNG of the page as the test artifact <name>.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	saveScreenshot(t, ctx, name+".png")
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// iso is a recorded instant as the page writes it (toISOString).
func iso(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// tookText is a duration as the page writes it (panes.js took).
func tookText(ms int64) string {
	switch {
	case ms < 0:
		return "-" + tookText(-ms)
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60000:
		return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
	}
	rest := (ms + 500) / 1000
	var parts []string
	for _, u := range []struct {
		name string
		size int64
	}{{"d", 86400}, {"h", 3600}, {"min", 60}, {"s", 1}} {
		n := rest / u.size
		rest -= n * u.size
		if n > 0 && len(parts) < 2 {
			parts = append(parts, fmt.Sprintf("%d %s", n, u.name))
		} else if len(parts) > 0 {
			break
		}
	}
	return strings.Join(parts, " ")
}

// payloadOf decodes an envelope's payload.
func payloadOf(t *testing.T, e event.Envelope) map[string]json.RawMessage {
	t.Helper()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatalf("#%d: %v", e.Sequence, err)
	}
	return p
}

func stringOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return s
}

// firstEvent returns the first event of type typ (whose stepId is step, when
// step is not empty).
func firstEvent(t *testing.T, log []event.Envelope, typ, step string) event.Envelope {
	t.Helper()
	for _, e := range log {
		if e.Type == typ && (step == "" || stringOf(t, payloadOf(t, e)["stepId"]) == step) {
			return e
		}
	}
	t.Fatalf("no %s %s in the log", typ, step)
	return event.Envelope{}
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

func textIs(t *testing.T, ctx context.Context, what, sel, want string) {
	t.Helper()
	waitJS(t, ctx, what, fmt.Sprintf(`(document.querySelector(%s) || {}).innerText === %s`, js(sel), js(want)), 10*time.Second)
}

// TestInspectorViewOpensAtCurrentEvent: an execution opens with the
// timeline scrolled to its current event, the last one, marked — a
// cancelled run of forty steps opens with its cancel in view.
func TestInspectorViewOpensAtCurrentEvent(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "long-1")
	last := log[len(log)-1]
	if last.Type != event.ExecutionCancelled || len(log) < 80 {
		t.Fatalf("long-1 ends with %s after %d events", last.Type, len(log))
	}
	ctx := openView(t, w, "long-1", "", last.Sequence)
	waitJS(t, ctx, "the cancel in view, marked", `(() => {
		const ol = document.querySelector('#timeline');
		const row = ol.querySelector('li.current');
		if (!row || row !== ol.lastElementChild || row.dataset.type !== 'EXECUTION_CANCELLED') return false;
		const box = ol.getBoundingClientRect(), r = row.getBoundingClientRect();
		return ol.scrollHeight > ol.clientHeight && ol.scrollTop > 0 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1 &&
			row.getAttribute('aria-current') === 'step' && document.querySelectorAll('#timeline li.current').length === 1;
	})()`, 10*time.Second)
	if y := evalJS[float64](t, ctx, `window.scrollY`); y != 0 {
		t.Fatalf("opening scrolled the page to %v: only the timeline should move", y)
	}
	screenshot(t, ctx, "view-opens-at-current-event")
}

// TestInspectorViewDurationsAndChart: each frame says how long its step
// took, from its recorded start to its recorded end; the timeline's
// settling rows too; and the chart draws each step and wait as a bar
// placed by those timestamps on an axis from the first event to the last,
// with a cursor at the slider's event.
func TestInspectorViewDurationsAndChart(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "order-1")
	ctx := openView(t, w, "order-1", "", log[len(log)-1].Sequence)
	t0, t1 := log[0].Timestamp, log[len(log)-1].Timestamp
	type bar struct {
		kind, id   string
		start, end event.Envelope
	}
	bars := []bar{
		{"step", "quote", firstEvent(t, log, event.StepStarted, "quote"), firstEvent(t, log, event.StepCompleted, "quote")},
		{"step", "check-stock", firstEvent(t, log, event.StepStarted, "check-stock"), firstEvent(t, log, event.StepFailed, "check-stock")},
		{"park", gate, firstEvent(t, log, event.ExecutionSuspended, ""), firstEvent(t, log, event.ExecutionResumed, "")},
		{"step", "charge", firstEvent(t, log, event.StepStarted, "charge"), firstEvent(t, log, event.StepCompleted, "charge")},
	}
	waitJS(t, ctx, "the chart", fmt.Sprintf(`document.querySelectorAll('#gantt li.g-row').length === %d`, len(bars)), 10*time.Second)
	for i, b := range bars {
		took := b.end.Timestamp - b.start.Timestamp
		row := fmt.Sprintf(`#gantt li.g-row:nth-of-type(%d)`, i+2) // after the axis
		a := float64(b.start.Timestamp-t0) / float64(t1-t0)
		wd := float64(b.end.Timestamp-t0)/float64(t1-t0) - a
		waitJS(t, ctx, "the bar of "+b.id, fmt.Sprintf(`(() => {
			const row = document.querySelector(%s), bar = row.querySelector('.g-bar');
			return row.dataset.kind === %s && row.dataset.id === %s && row.querySelector('.g-took').innerText === %s &&
				bar.dataset.from === '%d' && bar.dataset.to === '%d' &&
				Math.abs(parseFloat(bar.style.getPropertyValue('--a')) - %v) < 1e-9 && Math.abs(parseFloat(bar.style.getPropertyValue('--w')) - %v) < 1e-9;
		})()`, js(row), js(b.kind), js(b.id), js(tookText(took)), b.start.Timestamp, b.end.Timestamp, a, wd), 10*time.Second)
		if b.kind == "step" {
			textIs(t, ctx, "the frame of "+b.id, fmt.Sprintf(`#frames tr[data-step=%q] .took`, b.id), tookText(took))
			textIs(t, ctx, "the settling row of "+b.id, fmt.Sprintf(`#timeline li[data-seq="%d"] .note`, b.end.Sequence),
				fmt.Sprintf("took %s (from #%d)", tookText(took), b.start.Sequence))
		}
	}
	if !evalJS[bool](t, ctx, `(() => {
		const xs = [...document.querySelectorAll('#gantt .g-bar')].map((b) => [Number(b.dataset.from), b.getBoundingClientRect().left]);
		return xs.every((x, i) => i === 0 || (x[0] >= xs[i - 1][0]) === (x[1] >= xs[i - 1][1] - 0.5));
	})()`) {
		t.Fatal("the bars are not drawn in the order of their recorded starts")
	}
	if g := text(t, ctx, "#gates"); !strings.Contains(g, "(waited "+tookText(bars[2].end.Timestamp-bars[2].start.Timestamp)+")") {
		t.Fatalf("the gate does not say how long it waited: %q", g)
	}
	waitJS(t, ctx, "the cursor at the end", fmt.Sprintf(`document.querySelector('#gantt').dataset.cursor === '%d' && document.querySelector('#gantt').classList.contains('has-cursor')`,
		log[len(log)-1].Sequence), 10*time.Second)
	runIn(t, ctx)("click the bar of quote", clickJS(`#gantt li[data-id="quote"] .g-bar`))
	quoteEnd := bars[0].end
	waitJS(t, ctx, "the state where quote ended", shows("order-1", quoteEnd.Sequence)+fmt.Sprintf(
		` && document.querySelector('#gantt').dataset.cursor === '%d' && Math.abs(parseFloat(document.querySelector('#gantt').style.getPropertyValue('--cursor')) - %v) < 1e-9`,
		quoteEnd.Sequence, float64(quoteEnd.Timestamp-t0)/float64(t1-t0)), 10*time.Second)
	screenshot(t, ctx, "view-durations-and-chart")
}

// TestInspectorViewRetries: a retry row says which attempt failed, its
// error, the delay before the next attempt and when that was due (the
// failure's recorded time plus the recorded delay); the frame lists its
// attempts, and the chart marks the retry on the step's bar.
func TestInspectorViewRetries(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "flaky-1")
	retry := firstEvent(t, log, event.StepRetrying, "flaky-step")
	due := retry.Timestamp + 250
	ctx := openView(t, w, "flaky-1", "", log[len(log)-1].Sequence)
	row := fmt.Sprintf(`#timeline li[data-seq="%d"]`, retry.Sequence)
	textIs(t, ctx, "the retry row", row+" .detail", `flaky-step: attempt 2 in 250ms, after: "the warehouse timed out"`)
	textIs(t, ctx, "the retry row's note", row+" .note", "attempt 1 failed: the warehouse timed out; next attempt after 250 ms, due "+iso(due))
	textIs(t, ctx, "the frame's attempts", `#frames tr[data-step="flaky-step"] ol.attempts`,
		"attempt 1 failed at "+iso(retry.Timestamp)+": the warehouse timed out; attempt 2 after 250 ms, due "+iso(due))
	waitJS(t, ctx, "the retry on the bar", `document.querySelectorAll('#gantt li[data-id="flaky-step"] .g-retry').length === 1`, 10*time.Second)

	// A step still waiting to retry: 90 s, recorded.
	slow := w.log(t, "retrying-1")
	goTo(t, ctx, "retrying-1", slow[len(slow)-1].Sequence)
	again := firstEvent(t, slow, event.StepRetrying, "reserve")
	textIs(t, ctx, "the waiting retry row", fmt.Sprintf(`#timeline li[data-seq="%d"] .note`, again.Sequence),
		"attempt 1 failed: the warehouse is down; next attempt after 1 min 30 s, due "+iso(again.Timestamp+retryDelay.Milliseconds()))
	waitJS(t, ctx, "an open bar", `document.querySelector('#gantt li[data-id="reserve"] .g-bar').classList.contains('open')`+
		` && document.querySelector('#gantt li[data-id="reserve"] .g-took').innerText === 'still retrying'`, 10*time.Second)
	screenshot(t, ctx, "view-retries")
}

// TestInspectorViewPayloads: errors read as text (their code and message,
// never escaped JSON); every payload, output and error folds out as
// indented JSON with a copy button, which copies through the clipboard or,
// refused, through a textarea.
func TestInspectorViewPayloads(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "broken-1")
	card := firstEvent(t, log, event.StepFailed, "charge-card")
	var cardErr struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(payloadOf(t, card)["error"], &cardErr); err != nil || !strings.Contains(cardErr.Message, `card "4242" declined: <insufficient funds>`) {
		t.Fatalf("the card's error: %+v %v", cardErr, err)
	}
	failed := log[len(log)-1]
	var execErr struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(payloadOf(t, failed)["error"], &execErr); failed.Type != event.ExecutionFailed || err != nil {
		t.Fatalf("broken-1 ends with %s: %v", failed.Type, err)
	}
	ctx := openView(t, w, "broken-1", "", failed.Sequence)
	textIs(t, ctx, "the typed error", `#frames tr[data-step="reserve"] summary`, "typed error on quota: code RATE_LIMITED: slow down")
	textIs(t, ctx, "the untyped error", `#frames tr[data-step="charge-card"] summary`, "error: "+cardErr.Message)
	textIs(t, ctx, "the failed row", fmt.Sprintf(`#timeline li[data-seq="%d"] .detail`, card.Sequence), "charge-card: "+cardErr.Message)
	waitJS(t, ctx, "the execution's error", fmt.Sprintf(`document.querySelector('#state-summary').innerText.includes(%s)`, js("error: "+execErr.Message)), 10*time.Second)
	if s := text(t, ctx, "#detail"); strings.Contains(s, `\"`) {
		t.Fatalf("the view shows escaped JSON: %q", s)
	}

	// Folded out: the error as text over the indented JSON, and a copy
	// button.
	block := `#frames tr[data-step="charge-card"] details.json`
	runIn(t, ctx)("open the card's error", clickJS(block+" > summary"))
	waitJS(t, ctx, "the indented error", fmt.Sprintf(`(() => {
		const pre = document.querySelector(%s);
		return pre !== null && pre.textContent === JSON.stringify({ message: %s }, null, 2) && pre.textContent.includes('\n  "message": ') &&
			document.querySelector(%s).innerText === %s;
	})()`, js(block+" pre.json-text"), js(cardErr.Message), js(block+" .json-body .error-text"), js(cardErr.Message)), 10*time.Second)
	runIn(t, ctx)("refuse the clipboard, and copy", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true })`),
		clickJS(block+" button.copy"))
	waitJS(t, ctx, "copied through the textarea", fmt.Sprintf(`['fallback', 'selected'].includes(document.querySelector(%s).dataset.copied) && document.querySelector('#copy-buffer').value === document.querySelector(%s).textContent`,
		js(block+" button.copy"), js(block+" pre.json-text")), 10*time.Second)
	runIn(t, ctx)("a clipboard that takes it, and copy", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(navigator, 'clipboard', { configurable: true,
		value: { writeText: (s) => { window.clipped = s; return Promise.resolve(); } } })`), clickJS(block+" button.copy"))
	waitJS(t, ctx, "copied through the clipboard", fmt.Sprintf(`document.querySelector(%s).dataset.copied === 'clipboard' && window.clipped === document.querySelector(%s).textContent`,
		js(block+" button.copy"), js(block+" pre.json-text")), 10*time.Second)

	// A timeline row's payload, and the block stays open through a redraw.
	rowBlock := fmt.Sprintf(`#timeline li[data-seq="%d"] details.json`, failed.Sequence)
	runIn(t, ctx)("open the last row's payload", clickJS(rowBlock+" > summary"))
	waitJS(t, ctx, "the indented payload", fmt.Sprintf(`(() => { const pre = document.querySelector(%s);
		return pre !== null && JSON.stringify(JSON.parse(pre.textContent)) === JSON.stringify(%s) && pre.textContent.startsWith('{\n  "error": {\n    "'); })()`,
		js(rowBlock+" pre.json-text"), string(failed.Payload)), 10*time.Second)
	runIn(t, ctx)("slider to the card's failure", clickJS(fmt.Sprintf(`#timeline li[data-seq="%d"] button.seq`, card.Sequence)))
	waitJS(t, ctx, "the card's failure", shows("broken-1", card.Sequence)+` && document.querySelector(`+js(block)+`).open`, 10*time.Second)
	screenshot(t, ctx, "view-payloads")
}

// TestInspectorViewKernelDecisions: the kernel's own decisions read by
// what they are — a recorded clock reading as an ISO time with its raw
// milliseconds on hover, a random seed as one — beside the application's.
func TestInspectorViewKernelDecisions(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "clock-1")
	var now, seed event.Envelope
	for _, e := range log {
		if e.Type != event.DecisionRecorded {
			continue
		}
		switch stringOf(t, payloadOf(t, e)["decisionId"]) {
		case "__loom_now#0":
			now = e
		case "__loom_random#0":
			seed = e
		}
	}
	var ms int64
	if err := json.Unmarshal(payloadOf(t, now)["choice"], &ms); err != nil || seed.ID == "" {
		t.Fatalf("clock-1's kernel decisions: %v, seed %q", err, seed.ID)
	}
	ctx := openView(t, w, "clock-1", "", log[len(log)-1].Sequence)
	row := fmt.Sprintf(`#timeline li[data-seq="%d"] .detail`, now.Sequence)
	textIs(t, ctx, "the clock row", row, "clock reading #0: "+iso(ms)+" (__loom_now#0)")
	waitJS(t, ctx, "the clock's raw milliseconds", fmt.Sprintf(`document.querySelector(%s).title === '%d ms since the epoch' && document.querySelector(%s).getAttribute('datetime') === %s`,
		js(row+" time"), ms, js(row+" time"), js(iso(ms))), 10*time.Second)
	textIs(t, ctx, "the seed row", fmt.Sprintf(`#timeline li[data-seq="%d"] .detail`, seed.Sequence),
		"random seed #0: "+string(payloadOf(t, seed)["choice"])+" (__loom_random#0)")
	textIs(t, ctx, "the clock in the decisions", `#decisions tr[data-decision="__loom_now#0"] td:nth-child(2)`, iso(ms))
	waitJS(t, ctx, "the decisions, by meaning", `document.querySelector('#decisions tr[data-decision="__loom_now#0"] td').innerText.startsWith('clock reading #0')`+
		` && document.querySelector('#decisions tr[data-decision="__loom_random#0"] td').innerText.startsWith('random seed #0')`+
		` && document.querySelector('#decisions tr[data-decision="pick"] td:nth-child(2)').innerText === '"left"'`+
		` && !document.querySelector('#decisions tr[data-decision="pick"]').classList.contains('kernel')`, 10*time.Second)
	screenshot(t, ctx, "view-kernel-decisions")
}

// TestInspectorViewPending: a running execution's panel names its step in
// progress, its attempt, its last failure and when its next attempt is
// due; a parked one's its gate, its timeout and who may answer it (a
// child's end links to the child); an ended one has none.
func TestInspectorViewPending(t *testing.T) {
	w := newViewWorld(t)
	slow := w.log(t, "retrying-1")
	again := firstEvent(t, slow, event.StepRetrying, "reserve")
	ctx := openView(t, w, "retrying-1", "", slow[len(slow)-1].Sequence)
	step := `#pending .pending-step[data-step="reserve"]`
	waitJS(t, ctx, "the pending step", `!document.querySelector('#pending').hidden && document.querySelector(`+js(step)+`) !== null`, 10*time.Second)
	textIs(t, ctx, "the step in progress", step+" p", "step reserve retrying, attempt 2, started "+iso(firstEvent(t, slow, event.StepStarted, "reserve").Timestamp))
	textIs(t, ctx, "its last failure", step+" .last-failure", "last failure: the warehouse is down")
	textIs(t, ctx, "its next attempt", step+" .next-retry", "next attempt (2) due "+iso(again.Timestamp+retryDelay.Milliseconds())+
		", 1 min 30 s after the failure at "+iso(again.Timestamp))
	screenshot(t, ctx, "view-pending-retry")

	timed := w.log(t, "timed-1")
	park := firstEvent(t, timed, event.ExecutionSuspended, "")
	var wake struct {
		WakeAt int64 `json:"wakeAt"`
	}
	if err := json.Unmarshal(park.Payload, &wake); err != nil || wake.WakeAt == 0 {
		t.Fatalf("timed-1's park: %s %v", park.Payload, err)
	}
	goTo(t, ctx, "timed-1", park.Sequence)
	parked := `#pending .pending-park[data-gate="approve"]`
	textIs(t, ctx, "the gate", parked+" p", fmt.Sprintf("parked on approve since #%d, %s", park.Sequence, iso(park.Timestamp)))
	textIs(t, ctx, "its timeout", parked+" .timeout", "times out: "+iso(wake.WakeAt)+" (1 d after it parked)")
	waitJS(t, ctx, "its correlation key", `document.querySelector(`+js(parked)+`).innerText.includes('correlation key po-7')`, 10*time.Second)
	textIs(t, ctx, "who may answer", parked+" .who-answers", "who may answer: a caller the app's ResumeAuthenticator admits, with an answer its resume schema for approve accepts: "+
		"loom resume timed-1 --event approve --payload JSON; or its timer, at the timeout")
	screenshot(t, ctx, "view-pending-gate")

	family := w.log(t, "family")
	goTo(t, ctx, "family", family[len(family)-1].Sequence)
	textIs(t, ctx, "the child's end answers", `#pending .pending-park .who-answers`, "who may answer: the end of its child family/kid")
	runIn(t, ctx)("follow the child", clickJS(`#pending .who-answers a`))
	kid := w.log(t, "family/kid")
	waitJS(t, ctx, "the child, parked", shows("family/kid", kid[len(kid)-1].Sequence)+` && document.querySelector('#pending .pending-park[data-gate="release"]') !== null`, 20*time.Second)

	order := w.log(t, "order-1")
	goTo(t, ctx, "order-1", order[len(order)-1].Sequence)
	waitJS(t, ctx, "no panel for an ended execution", `document.querySelector('#pending').hidden && document.querySelector('#pending-body').childElementCount === 0`, 10*time.Second)
}

// TestInspectorViewLinks: every execution the view names — the one it was
// forked from (and the sequence), its forks, its parent and children, in
// the header, the panes and the timeline — is a link that opens it.
func TestInspectorViewLinks(t *testing.T) {
	w := newViewWorld(t)
	forkLog := w.log(t, "order-1-what-if")
	ctx := openView(t, w, "order-1-what-if", "", forkLog[len(forkLog)-1].Sequence)
	marker := firstEvent(t, forkLog, "__loom_fork__", "")
	var at struct {
		At int64 `json:"at"`
	}
	if err := json.Unmarshal(marker.Payload, &at); err != nil {
		t.Fatal(err)
	}
	hrefs := func(sel string) string {
		return evalJS[string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%s)].map((a) => a.getAttribute('href')).join(' ')`, js(sel)))
	}
	waitJS(t, ctx, "the fork's lineage", `document.querySelectorAll('#exec-lineage a').length === 2`, 10*time.Second)
	markerRow := fmt.Sprintf(`#timeline li[data-seq="%d"] .detail a`, marker.Sequence)
	parentLinks := fmt.Sprintf("#/x/order-1 #/x/order-1@%d", at.At)
	for _, c := range [][2]string{
		{"#exec-lineage a", parentLinks},
		{markerRow, parentLinks},
		{"#forks a", parentLinks + fmt.Sprintf(" #/x/order-1-what-if@%d", marker.Sequence)},
	} {
		if got := hrefs(c[0]); got != c[1] {
			t.Fatalf("%s: links %q, want %q", c[0], got, c[1])
		}
	}
	runIn(t, ctx)("open the parent at the fork point", clickJS(`#exec-lineage a[data-seq]`))
	waitJS(t, ctx, "order-1 at the fork point", shows("order-1", at.At)+fmt.Sprintf(` && location.hash === '#/x/order-1@%d' && document.querySelector('#seq').value === '%d'`, at.At, at.At), 20*time.Second)
	waitJS(t, ctx, "order-1's forks", `document.querySelector('#exec-lineage a') !== null && document.querySelector('#exec-lineage').innerText === 'forks: order-1-what-if'`+
		fmt.Sprintf(` && document.querySelector('#forks').innerText.includes('forks of this execution: order-1-what-if (at #%d)')`, at.At), 10*time.Second)
	runIn(t, ctx)("open the fork", clickJS(`#forks a[data-id="order-1-what-if"]`))
	waitJS(t, ctx, "the fork again", shows("order-1-what-if", forkLog[len(forkLog)-1].Sequence), 20*time.Second)

	family := w.log(t, "family")
	goTo(t, ctx, "family", family[len(family)-1].Sequence)
	spawn := firstEvent(t, family, event.StepCompleted, "__loom_spawn:kid")
	spawnRow := fmt.Sprintf(`#timeline li[data-seq="%d"] .detail`, spawn.Sequence)
	parkRow := fmt.Sprintf(`#timeline li[data-seq="%d"] .detail`, firstEvent(t, family, event.ExecutionSuspended, "").Sequence)
	for _, c := range [][2]string{
		{"#exec-lineage", "children: family/kid"},
		{"#forks .children", "children: family/kid (kid)"},
		{spawnRow, "__loom_spawn:kid → child family/kid"},
		{parkRow, "parked on __loom_child__: awaiting child family/kid"},
	} {
		textIs(t, ctx, c[0], c[0], c[1])
		if got := hrefs(c[0] + " a"); got != "#/x/family%2Fkid" {
			t.Fatalf("%s links %q", c[0], got)
		}
	}
	runIn(t, ctx)("open the child", clickJS(`#exec-lineage a`))
	kid := w.log(t, "family/kid")
	waitJS(t, ctx, "the child", shows("family/kid", kid[len(kid)-1].Sequence), 20*time.Second)
	for _, sel := range []string{"#exec-lineage", "#forks .child-of", `#timeline li[data-seq="0"] .detail`} {
		waitJS(t, ctx, "the parent in "+sel, fmt.Sprintf(`document.querySelector(%s) !== null && document.querySelector(%s).innerText.includes('child of family')`, js(sel), js(sel)), 10*time.Second)
		if got := hrefs(sel + " a"); got != "#/x/family" {
			t.Fatalf("%s links %q", sel, got)
		}
	}
	runIn(t, ctx)("back to the parent", clickJS(`#forks .child-of a`))
	waitJS(t, ctx, "the parent", shows("family", family[len(family)-1].Sequence), 20*time.Second)
	if bad := evalJS[string](t, ctx, `[...document.querySelectorAll('#detail a')].map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#/x/') && !h.startsWith('api/log?')).join(' ')`); bad != "" {
		t.Fatalf("links that open no execution: %q", bad)
	}
	screenshot(t, ctx, "view-links")
}

// TestInspectorViewDeepLink: #/x/<id>@<seq> opens the execution with the
// slider at seq; moving the slider rewrites the address in place; a
// sequence the log does not hold is said in the page, which opens at the
// last event and stays usable — and the API still answers it 404.
func TestInspectorViewDeepLink(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "order-1")
	last := log[len(log)-1].Sequence
	ctx := openView(t, w, "order-1", "3", 3)
	waitJS(t, ctx, "the slider at #3", `document.querySelector('#seq').value === '3' && document.querySelector('#timeline li.current').dataset.seq === '3'`+
		` && document.querySelector('#follow-note').textContent.startsWith('time-travelling') && document.querySelector('#seq-note').hidden && location.hash === '#/x/order-1@3'`, 10*time.Second)
	entries := evalJS[int](t, ctx, `history.length`)
	runIn(t, ctx)("one step on, by keyboard", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.ArrowRight))
	waitJS(t, ctx, "the address follows", shows("order-1", 4)+` && location.hash === '#/x/order-1@4'`, 10*time.Second)
	if n := evalJS[int](t, ctx, `history.length`); n != entries {
		t.Fatalf("moving the slider added history entries: %d → %d", entries, n)
	}

	runIn(t, ctx)("past the end", chromedp.Evaluate[chromedp.Void](`location.hash = '#/x/order-1@999'`))
	waitJS(t, ctx, "the note, at the last event", shows("order-1", last)+fmt.Sprintf(` && document.querySelector('#seq').value === '%d'`, last)+
		fmt.Sprintf(` && !document.querySelector('#seq-note').hidden && document.querySelector('#seq-note').innerText === 'order-1 has no event #999: its log ends at #%d. Showing #%d.'`, last, last), 10*time.Second)
	screenshot(t, ctx, "view-deep-link-out-of-range")
	runIn(t, ctx)("still usable: to the start", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.Home))
	waitJS(t, ctx, "the start", shows("order-1", 0)+` && document.querySelector('#seq-note').hidden && location.hash === '#/x/order-1@0'`, 10*time.Second)

	fork := w.log(t, "order-1-what-if")
	runIn(t, ctx)("another execution, past its end", chromedp.Evaluate[chromedp.Void](`location.hash = '#/x/order-1-what-if@50'`))
	waitJS(t, ctx, "the fork's note", shows("order-1-what-if", fork[len(fork)-1].Sequence)+
		` && document.querySelector('#seq-note').innerText.startsWith('order-1-what-if has no event #50')`, 20*time.Second)
	runIn(t, ctx)("not a sequence", chromedp.Evaluate[chromedp.Void](`location.hash = '#/x/order-1@soon'`))
	waitJS(t, ctx, "the note on a bad sequence", shows("order-1", last)+
		fmt.Sprintf(` && document.querySelector('#seq-note').innerText === '"soon" is not a sequence number: showing the last event, #%d.'`, last), 20*time.Second)

	resp, err := http.Get(w.url + "api/state?id=order-1&at=999")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), fmt.Sprintf(`has no event #999: its log ends at #%d`, last)) {
		t.Fatalf("the API past the end: %d %s", resp.StatusCode, b)
	}
	screenshot(t, ctx, "view-deep-link")
}

// TestInspectorViewDownload: the view links its log's download, which
// holds every envelope, one a line, in order.
func TestInspectorViewDownload(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "flaky-1")
	ctx := openView(t, w, "flaky-1", "", log[len(log)-1].Sequence)
	waitJS(t, ctx, "the link", `document.querySelector('#download-log').getAttribute('href') === 'api/log?id=flaky-1'`+
		` && document.querySelector('#download-log').getAttribute('download') === 'flaky-1.jsonl'`, 10*time.Second)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector('#download-log').href).then(async (r) => r.headers.get('Content-Type') + '\n' + await r.text())`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if lines[0] != "application/x-ndjson" || len(lines) != len(log)+1 {
		t.Fatalf("the download: %q, %d lines for %d events", lines[0], len(lines)-1, len(log))
	}
	for i, line := range lines[1:] {
		var e event.Envelope
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Sequence != log[i].Sequence || e.ID != log[i].ID || string(e.Payload) != string(log[i].Payload) {
			t.Fatalf("line %d: %v %s", i, err, line)
		}
	}
	kid := w.log(t, "family/kid")
	goTo(t, ctx, "family/kid", kid[len(kid)-1].Sequence)
	waitJS(t, ctx, "the child's link", `document.querySelector('#download-log').getAttribute('href') === 'api/log?id=family%2Fkid'`+
		` && document.querySelector('#download-log').getAttribute('download') === 'family_kid.jsonl'`, 10*time.Second)
	screenshot(t, ctx, "view-download")
}

// TestInspectorViewKeyboard: every control of the view has a name, and
// the view works from the keyboard with the focus in sight: the slider,
// a chart bar, a timeline row, a folded payload and its copy button, a
// link.
func TestInspectorViewKeyboard(t *testing.T) {
	w := newViewWorld(t)
	log := w.log(t, "order-1")
	ctx := openView(t, w, "order-1", "", log[len(log)-1].Sequence)
	if unnamed := evalJS[string](t, ctx, `[...document.querySelectorAll('#detail a, #detail button, #detail input, #detail summary, #sidebar a, #sidebar button')]
		.filter((n) => !((n.getAttribute('aria-label') || '').trim() || (n.labels && n.labels.length && n.labels[0].textContent.trim()) || n.textContent.trim()))
		.map((n) => n.outerHTML.slice(0, 80)).join('\n')`); unnamed != "" {
		t.Fatalf("controls without a name:\n%s", unnamed)
	}
	focused := func(what, cond string) {
		t.Helper()
		waitJS(t, ctx, what, `(() => { const n = document.activeElement; if (!n || !(`+cond+`)) return false;
			const s = getComputedStyle(n); return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2; })()`, 10*time.Second)
	}
	run := runIn(t, ctx)
	run("the slider to the start", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.Home))
	waitJS(t, ctx, "the start", shows("order-1", 0), 10*time.Second)
	run("tab to the chart", chromedp.KeyEvent(kb.Tab))
	focused("the first bar focused, in sight", `n.classList.contains('g-bar') && n.closest('li').dataset.id === 'quote'`)
	quoteEnd := firstEvent(t, log, event.StepCompleted, "quote").Sequence
	run("press the bar", chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "the state where quote ended", shows("order-1", quoteEnd), 10*time.Second)

	run("a timeline row", chromedp.Focus(`#timeline li[data-seq="5"] button.seq`), chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "the state at #5", shows("order-1", 5)+` && location.hash === '#/x/order-1@5'`, 10*time.Second)

	summary := `#frames tr[data-step="quote"] details.json > summary`
	run("unfold quote's output", chromedp.Focus(summary), chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "the output unfolded", `document.querySelector('#frames tr[data-step="quote"] details.json').open && document.querySelector('#frames tr[data-step="quote"] pre.json-text') !== null`, 10*time.Second)
	run("tab to copy", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true })`), chromedp.KeyEvent(kb.Tab))
	focused("the copy button focused, in sight", `n.classList.contains('copy') && n.closest('tr').dataset.step === 'quote'`)
	run("copy", chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "copied", `document.querySelector('#copy-buffer').value === document.querySelector('#frames tr[data-step="quote"] pre.json-text').textContent`+
		` && document.querySelector('#frames tr[data-step="quote"] button.copy').dataset.copied !== undefined`, 10*time.Second)
	run("fold it again", chromedp.Focus(summary), chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "folded", `!document.querySelector('#frames tr[data-step="quote"] details.json').open`, 10*time.Second)

	run("the link to the fork", chromedp.Focus(`#exec-lineage a`), chromedp.KeyEvent(kb.Enter))
	fork := w.log(t, "order-1-what-if")
	waitJS(t, ctx, "the fork", shows("order-1-what-if", fork[len(fork)-1].Sequence), 20*time.Second)
	screenshot(t, ctx, "view-keyboard")
}
