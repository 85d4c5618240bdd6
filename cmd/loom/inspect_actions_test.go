package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/sqlite"
	"github.com/loom-kernel/loom/wire"
)

// Acting from the inspector (issue 20, point 3), in headless Chromium: an
// app in this process — a runtime over a SQLite file serving the wire ABI
// behind a bearer token on loopback — and `loom inspect --store <the same
// file> --app <its address>`, whose page answers a gate through the form
// its JSON Schema makes, forks and cancels, each checked in the log.

// signOffGate's schema has a string enum, a number with a maximum and a
// boolean.
const (
	signOffGate   = "sign-off"
	signOffSchema = `{"type":"object","properties":{"decision":{"type":"string","enum":["approve","reject"]},` +
		`"amount":{"type":"number","maximum":1000},"urgent":{"type":"boolean"}},"required":["decision","amount"],"additionalProperties":false}`
	actionsAppToken = "app-t0ken-for-the-inspector"
)

type signOff struct {
	Decision string  `json:"decision"`
	Amount   float64 `json:"amount"`
	Urgent   bool    `json:"urgent"`
}

// signOffFlow budgets, then waits at the sign-off gate and returns what
// was signed.
func signOffFlow() *loom.Flow {
	budget := loom.NewStep("budget", func(_ context.Context, n int) (int, error) { return 100 * n, nil })
	return loom.NewFlow("ops.sign-off", func(ctx *loom.Context, n int) (map[string]any, error) {
		b, err := loom.Run(ctx, budget, n)
		if err != nil {
			return nil, err
		}
		s, err := loom.Suspend[signOff](ctx, signOffGate)
		if err != nil {
			return nil, err
		}
		return map[string]any{"budget": b, "decision": s.Decision, "amount": s.Amount, "urgent": s.Urgent}, nil
	}, loom.WithResumeSchema(signOffGate, signOffSchema))
}

// actionsApp runs the sign-off flow over the SQLite file at path and
// serves its wire ABI on loopback; it returns the runtime and the address.
func actionsApp(t *testing.T, path string) (*loom.Runtime, string) {
	t.Helper()
	st, err := sqlite.Storage(sqlite.StorageOptions{Path: path, Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := loom.New(loom.Config{Storage: st, Flows: []*loom.Flow{signOffFlow()}, StickyParks: -1, ResumeAuthenticator: approver{}})
	if err != nil {
		t.Fatal(errors.Join(err, st.Close()))
	}
	t.Cleanup(func() {
		if err := errors.Join(rt.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	})
	h, err := wire.Handler(rt, wire.Options{Events: st.Events, Authenticate: wire.BearerToken(actionsAppToken, "inspector")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return rt, srv.URL
}

// inspectorLoginURL reads what loom inspect --app prints once it serves:
// its loopback address and the address that logs in (with the token).
func inspectorLoginURL(t *testing.T, srv *background) (base, login string) {
	t.Helper()
	line := srv.waitLine(t, "Inspecting ", 30*time.Second)
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/)(\?token=[A-Za-z0-9_%-]{43,}) \(actions on http://127\.0\.0\.1:\d+/rpc; Ctrl-C to stop\)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no loopback login URL in %q", line)
	}
	return m[1], m[1] + m[2]
}

// field is the generated control of the answer at pointer.
func field(pointer string) string { return `#act-answer-form [data-field="` + pointer + `"]` }

// TestInspectorActionsInBrowser: the page, logged in by the address loom
// inspect printed, answers a parked execution's gate through the form its
// schema makes (a select, a number, a checkbox); an answer the schema
// refuses shows the app's detail in an alert that takes the focus, keeps
// what was typed and records nothing; the fixed answer completes the
// execution, which the page shows live. It forks at an earlier sequence
// (simulated) and links to the fork, and cancels another execution from
// the keyboard. A browser without the token gets the login page, and the
// API refuses it.
func TestInspectorActionsInBrowser(t *testing.T) {
	bin, _ := setup(t)
	path := filepath.Join(t.TempDir(), "sign-off.db")
	rt, appURL := actionsApp(t, path)
	actx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, id := range []string{"so-1", "so-2"} {
		if _, err := rt.Start(actx, "ops.sign-off", 3, loom.WithExecutionID(id)); err != nil {
			t.Fatal(err)
		}
		if st, err := rt.WaitForSettled(actx, id); err != nil || st.Status != fold.StatusSuspended {
			t.Fatalf("%s: %v %v", id, st.Status, err)
		}
	}
	srv := startLoom(t, bin, "inspect", "--store", path, "--app", appURL, "--app-token", actionsAppToken)
	base, login := inspectorLoginURL(t, srv)

	ctx := browser(t)
	run := runIn(t, ctx)
	run("log in", chromedp.Navigate(login), chromedp.WaitVisible(`#executions li[data-id="so-1"]`))
	waitJS(t, ctx, "the actions are on", `document.body.dataset.actions === 'on'`, 20*time.Second)
	if href := evalJS[string](t, ctx, `location.href`); href != base {
		t.Fatalf("after the login the page is at %q, want %q (the token left out)", href, base)
	}

	// The form the gate's schema makes.
	parked := readLog(t, path, "so-1")
	run("select so-1", clickJS(`#executions li[data-id="so-1"] a`))
	waitJS(t, ctx, "the answer form", shows("so-1", parked[len(parked)-1].Sequence)+
		` && document.querySelector('#pending').nextElementSibling.id === 'actions' && document.querySelector('`+field("/amount")+`') !== null`, 20*time.Second)
	form := evalJS[string](t, ctx, `Array.from(document.querySelectorAll('#act-answer-form [data-field]')).map(f => {
		const label = document.querySelector('label[for="' + f.id + '"]');
		return f.dataset.field + ' ' + f.tagName.toLowerCase() + (f.type ? ':' + f.type : '') + ' ' + (label ? label.textContent : 'NO LABEL') +
			(f.tagName === 'SELECT' ? ' [' + Array.from(f.options).map(o => o.text).join('|') + ']' : '');
	}).join('\n')`)
	want := "/decision select:select-one decision (required) [— choose —|approve|reject]\n" +
		"/amount input:number amount (required)\n/urgent input:checkbox urgent"
	if form != want {
		t.Fatalf("the generated form:\n%s\nwant:\n%s", form, want)
	}

	// An amount over the schema's maximum: the app refuses, the page says
	// where, and nothing is recorded.
	choose := fmt.Sprintf(`(s => { s.value = Array.from(s.options).find(o => o.text === 'approve').value; s.dispatchEvent(new Event('change')); })(document.querySelector(%q))`, field("/decision"))
	run("fill the form", chromedp.Evaluate[chromedp.Void](choose), setInput(field("/amount"), "5000"), clickJS(field("/urgent")))
	run("answer", clickJS(`#act-answer-form button[type="submit"]`))
	alert := `#act-answer-form [role="alert"]`
	waitJS(t, ctx, "the app's refusal", fmt.Sprintf(`(a => a && !a.hidden && a.dataset.code === '%d' && a.innerText.includes('/amount is above the maximum the schema allows')`+
		` && document.activeElement === a)(document.querySelector(%q))`, wire.CodePayloadInvalid, alert), 20*time.Second)
	if got := text(t, ctx, alert); !strings.Contains(got, "Refused (code -32020): the resume payload does not satisfy the schema of gate \"sign-off\" at /amount") {
		t.Fatalf("the alert says %q", got)
	}
	if kept := evalJS[string](t, ctx, fmt.Sprintf(`[%q, %q, %q].map(s => { const f = document.querySelector(s); return f.type === 'checkbox' ? String(f.checked) : f.options ? f.options[f.selectedIndex].text : f.value; }).join(',')`,
		field("/decision"), field("/amount"), field("/urgent"))); kept != "approve,5000,true" {
		t.Fatalf("after the refusal the form holds %q", kept)
	}
	if n := len(readLog(t, path, "so-1")); n != len(parked) {
		t.Fatalf("the refused answer appended %d events", n-len(parked))
	}
	updateDocsImage(t, "inspector-actions.png", saveScreenshot(t, ctx, "inspector-actions-refused.png"))
	// The raw JSON toggle shows the answer the fields make, and back.
	run("raw JSON", clickJS(`#act-answer-form .act-raw-toggle`))
	if raw := evalJS[string](t, ctx, `(a => a.closest('[hidden]') ? 'HIDDEN' : JSON.stringify(JSON.parse(a.value)))(document.querySelector('#act-answer-form .act-raw-json'))`); raw != `{"decision":"approve","amount":5000,"urgent":true}` {
		t.Fatalf("the raw JSON of the form: %s", raw)
	}
	run("the fields again", clickJS(`#act-answer-form .act-raw-toggle`))
	if hidden := evalJS[bool](t, ctx, `document.querySelector('#act-answer-form .act-root').hidden || !document.querySelector('#act-answer-form .act-raw').hidden`); hidden {
		t.Fatal("the toggle did not bring the fields back")
	}

	// The fixed answer: the execution completes, live in the page.
	run("fix the amount", setInput(field("/amount"), "500"), clickJS(`#act-answer-form button[type="submit"]`))
	waitJS(t, ctx, "the completion, live", `document.querySelector('#state-status').textContent === 'completed'`+
		` && document.querySelector('#exec-status').textContent === 'completed' && document.querySelector('#act-answer-form') === null`+
		` && document.querySelector('#act-status').innerText.includes('answered gate sign-off of so-1')`, 20*time.Second)
	done, err := rt.LoadState(actx, "so-1")
	if err != nil || done.Status != fold.StatusCompleted {
		t.Fatalf("so-1 after the answer: %v %v", done.Status, err)
	}
	var out signOff
	if err := json.Unmarshal(done.Variables.Output, &out); err != nil || out != (signOff{Decision: "approve", Amount: 500, Urgent: true}) {
		t.Fatalf("so-1's output: %s %v", done.Variables.Output, err)
	}
	if got := evalJS[string](t, ctx, `document.querySelector('#state-pane').dataset.seq`); got != fmt.Sprint(done.Sequence) {
		t.Fatalf("the page shows #%s, the log ends at #%d", got, done.Sequence)
	}
	saveScreenshot(t, ctx, "inspector-actions-completed.png")

	// Fork at #2 (after the budget step), simulated: a link to the fork.
	run("slider to #2", chromedp.Focus("#seq"), chromedp.KeyEvent(kb.Home), chromedp.KeyEvent(kb.ArrowRight), chromedp.KeyEvent(kb.ArrowRight))
	waitJS(t, ctx, "the fork at #2", shows("so-1", 2)+` && document.querySelector('#actions').dataset.seq === '2'`+
		` && document.querySelector('#act-fork button[type="submit"]').textContent === 'Fork at #2' && document.querySelector('#act-fork .act-simulate').checked`, 10*time.Second)
	run("fork", clickJS(`#act-fork button[type="submit"]`))
	waitJS(t, ctx, "the link to the fork", `document.querySelector('#act-fork-result a') !== null`, 20*time.Second)
	forkID := evalJS[string](t, ctx, `document.querySelector('#act-fork-result a').dataset.id`)
	fork, err := rt.WaitForSettled(actx, forkID)
	if err != nil || fork.Status != fold.StatusSuspended {
		t.Fatalf("the fork %s: %v %v", forkID, fork.Status, err)
	}
	var chain []struct {
		ExecutionID string `json:"executionId"`
		Sequence    int64  `json:"sequence"`
		Simulate    bool   `json:"simulate"`
	}
	if err := json.Unmarshal(fork.Variables.ForkChain, &chain); err != nil || len(chain) != 1 || chain[0].ExecutionID != "so-1" || chain[0].Sequence != 2 || !chain[0].Simulate {
		t.Fatalf("the fork's lineage: %s %v", fork.Variables.ForkChain, err)
	}
	if got := text(t, ctx, "#act-fork-result"); got != "forked at #2 (simulated) into open the fork "+forkID {
		t.Fatalf("the fork's result: %q", got)
	}
	run("open the fork", clickJS(`#act-fork-result a`))
	waitJS(t, ctx, "the fork, parked", `document.querySelector('#exec-header').dataset.execution === `+js(forkID)+
		` && document.querySelector('#act-answer-form') !== null`, 20*time.Second)

	// Cancel so-2 from the keyboard: the reason, then Enter.
	run("select so-2", clickJS(`#executions li[data-id="so-2"] a`))
	waitJS(t, ctx, "so-2's actions", `document.querySelector('#actions').dataset.execution === 'so-2' && !document.querySelector('#act-cancel').hidden`, 20*time.Second)
	before := readLog(t, path, "so-2")
	run("cancel so-2", chromedp.Focus(`#act-cancel .act-reason`), chromedp.KeyEvent("superseded by so-1"), chromedp.KeyEvent(kb.Enter))
	waitJS(t, ctx, "so-2 cancelled, live", `document.querySelector('#exec-status').textContent === 'cancelled' && document.querySelector('#act-cancel').hidden`+
		` && document.querySelector('#act-status').innerText === 'cancelled so-2: superseded by so-1'`, 20*time.Second)
	log := readLog(t, path, "so-2")
	if last := log[len(log)-1]; len(log) != len(before)+1 || last.Type != event.ExecutionCancelled || !strings.Contains(string(last.Payload), "superseded by so-1") {
		t.Fatalf("so-2's log ends %s %s", last.Type, last.Payload)
	}

	// Without the token: the login page, and the API refuses.
	other := browser(t)
	runIn(t, other)("open without the token", chromedp.Navigate(base))
	waitJS(t, other, "the login page", `document.body.innerText.includes('open the link loom inspect printed')`, 10*time.Second)
	if n := evalJS[int](t, other, `document.querySelectorAll('script, #executions').length`); n != 0 {
		t.Fatalf("the login page holds %d scripts or lists", n)
	}
	status, err := chromedp.Run(other, chromedp.Evaluate[int](`fetch('api/executions').then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("the API without a login: %d %v", status, err)
	}
	resp, err := http.Get(base + "api/state?id=so-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the API without a login, outside the browser: %d", resp.StatusCode)
	}

	if err := srv.interrupt(t); err != nil {
		t.Fatalf("loom inspect after Ctrl-C: %v", err)
	}
}

// TestInspectorActionsFlags: without --app the inspector is read-only as
// ever; --app-token or --inspect-token without --app, a short
// --inspect-token and an app that refuses the token are usage errors.
func TestInspectorActionsFlags(t *testing.T) {
	bin, fx := setup(t)
	_, appURL := actionsApp(t, filepath.Join(t.TempDir(), "flags.db"))
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--app-token", "x"}, "--app-token goes with --app"},
		{[]string{"--inspect-token", "x"}, "--inspect-token goes with --app"},
		{[]string{"--app", appURL, "--app-token", "wrong"}, "refused --app-token"},
		{[]string{"--app", appURL, "--app-token", actionsAppToken, "--inspect-token", "short"}, "at least 16 bytes"},
	} {
		_, errOut, code := loomRun(t, bin, append([]string{"inspect", "--store", fx.path}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, actionsAppToken) {
			t.Errorf("loom inspect %v: exit %d, %q; want exit %d saying %q", tc.args, code, errOut, exitUsage, tc.says)
		}
	}
	srv := startLoom(t, bin, "inspect", "--store", copyStore(t, fx.path))
	url := inspectorURL(t, srv)
	resp, err := http.Get(url + "api/session")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	err = json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || s["actions"] != false || s["check"] != false || len(s) != 2 {
		t.Fatalf("a read-only inspector's session: %d %v %v", resp.StatusCode, s, err)
	}
	if err := srv.interrupt(t); err != nil {
		t.Fatal(err)
	}
}
