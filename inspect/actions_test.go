package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/loomtest"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// Acting from the inspector (issue 20, point 3): an app — a real runtime
// over memory stores, serving the wire ABI behind a bearer token on
// loopback — and an inspector over the same store acting through a
// wire.Client of it. Every refusal is checked against the log: nothing
// appended.

const (
	appToken   = "app-token-for-the-wire-0123"
	loginToken = "login-token-of-the-inspector-0123"
)

// reviewSchema is the resume schema of the review gate: a string enum, a
// number with a maximum and a boolean.
const reviewSchema = `{"type":"object","properties":{"decision":{"enum":["approve","reject"]},
"amount":{"type":"number","maximum":1000},"urgent":{"type":"boolean"}},"required":["decision","amount"],"additionalProperties":false}`

type review struct {
	Decision string  `json:"decision"`
	Amount   float64 `json:"amount"`
	Urgent   bool    `json:"urgent"`
}

// actFlows are the app's flows: review (a step, then the review gate),
// calc.v1 (fails on 0) and calc.v2 (its fix), and pay (a charge with side
// effects, which charge runs).
func actFlows(charge func(context.Context, int) (string, error)) []*loom.Flow {
	prepare := loom.NewStep("prepare", func(_ context.Context, n int) (int, error) { return n, nil })
	reviewFlow := loom.NewFlow("review", func(ctx *loom.Context, n int) (string, error) {
		if _, err := loom.Run(ctx, prepare, n); err != nil {
			return "", err
		}
		r, err := loom.Suspend[review](ctx, "review")
		if err != nil {
			return "", err
		}
		return r.Decision, nil
	}, loom.WithResumeSchema("review", reviewSchema))
	v1 := loom.NewFlow("calc.v1", func(_ *loom.Context, n int) (int, error) {
		if n == 0 {
			return 0, errors.New("calc.v1 cannot take 0")
		}
		return n, nil
	})
	v2 := loom.NewFlow("calc.v2", func(_ *loom.Context, n int) (int, error) { return 2 * n, nil })
	pay := loom.NewStep("charge", charge, loom.NonIdempotent())
	payFlow := loom.NewFlow("pay", func(ctx *loom.Context, amount int) (string, error) { return loom.Run(ctx, pay, amount) })
	return []*loom.Flow{reviewFlow, v1, v2, payFlow}
}

// actWorld is the app, the inspector acting on it, and its clock.
type actWorld struct {
	t      *testing.T
	rt     *loom.Runtime
	events *memstore.EventStore
	url    string // the inspector's
	appURL string
	cookie string // the name of its session cookie, once a login saw it
	clock  *loomtest.Clock
}

// newActWorld starts the app over events (which may hold a crashed log:
// it is recovered) and an inspector with Actions, the login token and
// tweak's last word on its options.
func newActWorld(t *testing.T, events *memstore.EventStore, tweak func(*inspect.Options)) *actWorld {
	t.Helper()
	if events == nil {
		events = memstore.NewEventStore()
	}
	rt, err := loom.New(loom.Config{Events: events, Flows: actFlows(func(context.Context, int) (string, error) { return "charged", nil }),
		Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	h, err := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken(appToken, "inspector")})
	if err != nil {
		t.Fatal(err)
	}
	app := httptest.NewServer(h)
	t.Cleanup(app.Close)
	client, err := wire.NewClient(app.URL, wire.WithToken(appToken))
	if err != nil {
		t.Fatal(err)
	}
	w := &actWorld{t: t, rt: rt, events: events, clock: loomtest.NewClock(time.Time{})}
	opts := inspect.Options{Actions: client, Token: loginToken, Now: w.clock.Now}
	if tweak != nil {
		tweak(&opts)
	}
	in, err := inspect.New(inspect.Source{Events: events}, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: the server's Close waits for open streams
	w.url = srv.URL
	w.appURL = app.URL
	return w
}

func actCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start starts id of flow with input and waits until it settles.
func (w *actWorld) start(id, flow string, input any) fold.State {
	w.t.Helper()
	ctx := actCtx(w.t)
	if _, err := w.rt.Start(ctx, flow, input, loom.WithExecutionID(id)); err != nil {
		w.t.Fatal(err)
	}
	st, err := w.rt.WaitForSettled(ctx, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

func (w *actWorld) log(id string) []event.Envelope {
	w.t.Helper()
	evs, err := store.Read(context.Background(), w.events, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

// answer is one response of the inspector.
type answer struct {
	status int
	header http.Header
	body   string
}

// json decodes the answer's body into v.
func (a answer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("the answer (%d) is not JSON: %v\n%s", a.status, err, a.body)
	}
}

// do sends one request; header holds name, value pairs. Redirects are not
// followed.
func (w *actWorld) do(method, path, body string, header ...string) answer {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	if strings.Contains(string(b), loginToken) || strings.Contains(string(b), appToken) ||
		strings.Contains(resp.Header.Get("Location"), loginToken) {
		w.t.Fatalf("%s %s echoed a token: %s", method, path, b)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// login opens a session with the token and returns its cookie header and
// its csrf.
func (w *actWorld) login() (cookie, csrf string) {
	w.t.Helper()
	a := w.do("GET", "/?token="+loginToken, "")
	if a.status != http.StatusSeeOther {
		w.t.Fatalf("a login answered %d: %s", a.status, a.body)
	}
	var got *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if strings.HasPrefix(c.Name, "loom_inspect_") {
			got = c
		}
	}
	if got == nil {
		w.t.Fatalf("a login set no session cookie: %v", a.header)
	}
	w.cookie = got.Name
	cookie = got.Name + "=" + got.Value
	var s struct {
		Actions bool   `json:"actions"`
		CSRF    string `json:"csrf"`
	}
	w.do("GET", "/api/session", "", "Cookie", cookie).json(w.t, &s)
	if !s.Actions || len(s.CSRF) < 32 {
		w.t.Fatalf("the session says actions %v, csrf %q", s.Actions, s.CSRF)
	}
	return cookie, s.CSRF
}

// post is a POST of an action from the page: JSON, with the cookie and
// the csrf.
func (w *actWorld) post(path, body, cookie, csrf string, header ...string) answer {
	w.t.Helper()
	return w.do("POST", path, body, append([]string{"Content-Type", "application/json", "Cookie", cookie, inspect.CSRFHeader, csrf,
		"Origin", w.url, "Sec-Fetch-Site", "same-origin"}, header...)...)
}

// unchanged fails the test when id's log is no longer n events long.
func (w *actWorld) unchanged(what, id string, n int) {
	w.t.Helper()
	if got := len(w.log(id)); got != n {
		w.t.Fatalf("%s: the log of %s went from %d to %d events", what, id, n, got)
	}
}

// TestActionsNeedALogin: New refuses actions without a login, and a token
// that can be guessed, with an *OptionsError naming the option.
func TestActionsNeedALogin(t *testing.T) {
	client, err := wire.NewClient("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	events := memstore.NewEventStore()
	for _, tc := range []struct {
		opts   inspect.Options
		option string
		says   string
	}{
		{inspect.Options{Actions: client}, "Actions", "set Options.Token"},
		{inspect.Options{Actions: client, Token: "short"}, "Token", "at least 16 bytes"},
		{inspect.Options{Token: "short"}, "Token", "at least 16 bytes"},
	} {
		in, err := inspect.New(inspect.Source{Events: events}, tc.opts)
		var oe *inspect.OptionsError
		if in != nil || !errors.As(err, &oe) || oe.Option != tc.option || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(%+v) = %v, %v; want an *OptionsError on %s saying %q", tc.opts, in, err, tc.option, tc.says)
		}
	}
}

// TestActionsLogin: with a token, every request needs a session or the
// bearer token. Without, the API answers 401 and the page the login page;
// a wrong token sets no cookie; the right one sets an HttpOnly,
// SameSite=Strict cookie and redirects to the address without it; a forged
// cookie, a wrong bearer and an expired session are refused.
func TestActionsLogin(t *testing.T) {
	w := newActWorld(t, nil, nil)
	w.start("r-1", "review", 1)
	for _, path := range []string{"/api/executions", "/api/session", "/api/state?id=r-1", "/api/gate?id=r-1", "/api/log?id=r-1"} {
		a := w.do("GET", path, "")
		var e struct {
			Error string `json:"error"`
		}
		if a.json(t, &e); a.status != http.StatusUnauthorized || !strings.Contains(e.Error, "open the link loom inspect printed") {
			t.Errorf("GET %s without a session: %d %s", path, a.status, a.body)
		}
	}
	for _, path := range []string{"/", "/?token=wrong-token-of-the-right-length", "/assets/app.js"} {
		a := w.do("GET", path, "")
		if a.status != http.StatusUnauthorized || !strings.Contains(a.body, "open the link <code>loom inspect</code> printed") ||
			strings.Contains(a.body, "<script") || a.header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s without a session: %d, cookie %q\n%s", path, a.status, a.header.Get("Set-Cookie"), a.body)
		}
	}

	a := w.do("GET", "/?q=r-&token="+loginToken, "")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "./?q=r-" {
		t.Fatalf("a login: %d to %q", a.status, a.header.Get("Location"))
	}
	cookies := (&http.Response{Header: a.header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("a login set %d cookies", len(cookies))
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || len(c.Value) < 43 ||
		c.MaxAge != int(inspect.SessionLifetime/time.Second) {
		t.Fatalf("the session cookie: %+v", c)
	}
	cookie := c.Name + "=" + c.Value
	if a := w.do("GET", "/", "", "Cookie", cookie); a.status != http.StatusOK || !strings.Contains(a.body, "assets/actions.js") {
		t.Fatalf("the page with a session: %d", a.status)
	}
	if a := w.do("GET", "/api/state?id=r-1", "", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("a read with a session: %d %s", a.status, a.body)
	}
	if a := w.do("GET", "/api/executions", "", "Cookie", c.Name+"=forged-"+c.Value[7:]); a.status != http.StatusUnauthorized {
		t.Fatalf("a forged cookie: %d", a.status)
	}
	if a := w.do("GET", "/api/executions", "", "Authorization", "Bearer "+loginToken); a.status != http.StatusOK {
		t.Fatalf("the bearer token: %d %s", a.status, a.body)
	}
	var s struct {
		Actions bool    `json:"actions"`
		CSRF    *string `json:"csrf"`
	}
	if w.do("GET", "/api/session", "", "Authorization", "Bearer "+loginToken).json(t, &s); !s.Actions || s.CSRF != nil {
		t.Fatalf("a bearer's session: %+v", s)
	}
	if a := w.do("GET", "/api/executions", "", "Authorization", "Bearer wrong-token-of-the-right-length", "Cookie", cookie); a.status != http.StatusUnauthorized {
		t.Fatalf("a wrong bearer token, with a session: %d", a.status)
	}

	w.clock.Advance(inspect.SessionLifetime - time.Second)
	if a := w.do("GET", "/api/executions", "", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("a session before its end: %d", a.status)
	}
	w.clock.Advance(time.Second)
	if a := w.do("GET", "/api/executions", "", "Cookie", cookie); a.status != http.StatusUnauthorized {
		t.Fatalf("a session at its end: %d", a.status)
	}
}

// TestActionsSessionCap: past MaxSessions a login ends the oldest session.
func TestActionsSessionCap(t *testing.T) {
	w := newActWorld(t, nil, nil)
	var first, last string
	for i := range inspect.MaxSessions + 1 {
		a := w.do("GET", "/?token="+loginToken, "")
		c := (&http.Response{Header: a.header}).Cookies()[0]
		if i == 0 {
			first = c.Name + "=" + c.Value
		}
		last = c.Name + "=" + c.Value
		w.clock.Advance(time.Second)
	}
	if a := w.do("GET", "/api/executions", "", "Cookie", first); a.status != http.StatusUnauthorized {
		t.Fatalf("the oldest session past the cap: %d", a.status)
	}
	if a := w.do("GET", "/api/executions", "", "Cookie", last); a.status != http.StatusOK {
		t.Fatalf("the newest session: %d", a.status)
	}
}

// TestActionsRefuseForgedAndMalformedPosts: a POST a page of another
// origin could forge (no csrf, a wrong one, a cross-site Origin or
// Sec-Fetch-Site), or whose body is not exactly the endpoint's, is refused
// before anything reaches the app: the log stays as it was and the
// execution parked. The same answer with a good request would complete it;
// a bearer of the token acts without a csrf.
func TestActionsRefuseForgedAndMalformedPosts(t *testing.T) {
	w := newActWorld(t, nil, nil)
	w.start("r-1", "review", 1)
	n := len(w.log("r-1"))
	cookie, csrf := w.login()
	good := `{"id":"r-1","eventType":"review","payload":{"decision":"approve","amount":10}}`
	for _, tc := range []struct {
		name   string
		body   string
		header []string // over the page's own
		status int
		says   string
	}{
		{"no csrf header", good, []string{inspect.CSRFHeader, ""}, http.StatusForbidden, "header is missing"},
		{"a wrong csrf", good, []string{inspect.CSRFHeader, csrf[:len(csrf)-2] + "xx"}, http.StatusForbidden, "is not this session's csrf"},
		{"a cross-site origin", good, []string{"Origin", "http://evil.example"}, http.StatusForbidden, "another origin"},
		{"another port of the host", good, []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden, "another origin"},
		{"sec-fetch-site cross-site", good, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "another site"},
		{"sec-fetch-site same-site", good, []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden, "another site"},
		{"a text/plain body", good, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "Content-Type: application/json"},
		{"no content type", good, []string{"Content-Type", ""}, http.StatusUnsupportedMediaType, "Content-Type: application/json"},
		{"an unknown member", `{"id":"r-1","eventType":"review","payload":{},"wait":true}`, nil, http.StatusBadRequest, `"/wait" is unknown`},
		{"a member in another case", `{"ID":"r-1","eventType":"review","payload":{}}`, nil, http.StatusBadRequest, `"/ID" is unknown`},
		{"a member twice", `{"id":"r-1","id":"r-1","eventType":"review"}`, nil, http.StatusBadRequest, "given twice"},
		{"a wrong type", `{"id":1,"eventType":"review"}`, nil, http.StatusBadRequest, `"/id" has the wrong type`},
		{"not an object", `["r-1"]`, nil, http.StatusBadRequest, "is a JSON object with id, eventType and payload"},
		{"not JSON", `{"id":"r-1",`, nil, http.StatusBadRequest, "not JSON"},
		{"not UTF-8", "{\"id\":\"r-\xff\",\"eventType\":\"review\"}", nil, http.StatusBadRequest, "not JSON in valid UTF-8"},
		{"trailing data", good + `{}`, nil, http.StatusBadRequest, "not JSON"},
		{"no event type", `{"id":"r-1","payload":{}}`, nil, http.StatusBadRequest, "eventType is required"},
		{"too big", `{"id":"r-1","eventType":"review","payload":"` + strings.Repeat("x", inspect.MaxActionBytes) + `"}`, nil,
			http.StatusRequestEntityTooLarge, "over 1048576 bytes"},
	} {
		a := w.post("/api/act/resume", tc.body, cookie, csrf, tc.header...)
		var e struct {
			Error string `json:"error"`
		}
		if a.json(t, &e); a.status != tc.status || !strings.Contains(e.Error, tc.says) || !strings.Contains(e.Error, "nothing was sent to the app") {
			t.Errorf("%s: %d %q; want %d saying %q", tc.name, a.status, e.Error, tc.status, tc.says)
		}
		w.unchanged(tc.name, "r-1", n)
	}
	// Every other POST, and every other method, stays refused.
	for _, r := range [][2]string{{"POST", "/api/executions"}, {"POST", "/"}, {"PUT", "/api/act/resume"}, {"DELETE", "/api/act/cancel"}} {
		if a := w.do(r[0], r[1], good, "Content-Type", "application/json", "Cookie", cookie, inspect.CSRFHeader, csrf); a.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d", r[0], r[1], a.status)
		}
	}
	w.unchanged("other methods", "r-1", n)
	// A cookie session's POST without a cookie is unauthenticated.
	if a := w.do("POST", "/api/act/resume", good, "Content-Type", "application/json", inspect.CSRFHeader, csrf); a.status != http.StatusUnauthorized {
		t.Errorf("a POST without the cookie: %d", a.status)
	}
	w.unchanged("no cookie", "r-1", n)
	if st, err := w.rt.LoadState(context.Background(), "r-1"); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("r-1 after the refusals: %v %v", st.Status, err)
	}

	// Without Actions the endpoints do not exist: POST is 405 as ever.
	ro, err := inspect.New(inspect.Source{Events: w.events}, inspect.Options{Token: loginToken})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://127.0.0.1/api/act/resume", strings.NewReader(good))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+loginToken)
	if ro.ServeHTTP(rec, req); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("an action on an inspector without Actions: %d", rec.Code)
	}
	w.unchanged("no actions", "r-1", n)

	// A bearer of the token needs no csrf: no browser sends it unasked.
	if a := w.do("POST", "/api/act/cancel", `{"id":"r-1","reason":"by a script"}`, "Content-Type", "application/json",
		"Authorization", "Bearer "+loginToken); a.status != http.StatusOK {
		t.Fatalf("a bearer's cancel: %d %s", a.status, a.body)
	}
	if st, err := w.rt.WaitForSettled(actCtx(t), "r-1"); err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("r-1 after the bearer's cancel: %v %v", st.Status, err)
	}
}

// refusal is the body of an app's refusal as the inspector passes it on.
type refusal struct {
	Error string          `json:"error"`
	Code  int             `json:"code"`
	Data  json.RawMessage `json:"data"`
}

func (a answer) refusal(t *testing.T) refusal {
	t.Helper()
	var r refusal
	a.json(t, &r)
	return r
}

// TestActionsAnswerAGate: GET /api/gate shows the gate and its schema; an
// answer the schema refuses comes back with the app's code and data
// (which field failed), nothing recorded and the execution still parked;
// another gate's name and an unknown execution likewise; then a good
// answer completes it.
func TestActionsAnswerAGate(t *testing.T) {
	w := newActWorld(t, nil, nil)
	parked := w.start("r-1", "review", 1)
	n := len(w.log("r-1"))
	cookie, csrf := w.login()

	var g wire.GateResult
	if a := w.do("GET", "/api/gate?id=r-1", "", "Cookie", cookie); a.status != http.StatusOK {
		t.Fatalf("the gate: %d %s", a.status, a.body)
	} else if a.json(t, &g); g.Gate == nil || g.Gate.Kind != wire.GateNamed || g.Gate.On != "review" || g.Gate.Since != parked.Variables.SuspendedOn.Seq ||
		!strings.Contains(string(g.Gate.Schema), `"maximum":1000`) || g.FlowID != "review" {
		t.Fatalf("the gate: %s", a.body)
	}

	if a := w.do("GET", "/api/gate", "", "Cookie", cookie); a.status != http.StatusBadRequest || !strings.Contains(a.body, "id is required") {
		t.Fatalf("the gate without an id: %d %s", a.status, a.body)
	}
	if a := w.do("GET", "/api/gate?id=r-9", "", "Cookie", cookie); a.status != http.StatusNotFound || a.refusal(t).Code != wire.CodeExecutionNotFound {
		t.Fatalf("the gate of no execution: %d %s", a.status, a.body)
	}

	a := w.post("/api/act/resume", `{"id":"r-1","eventType":"review","payload":{"decision":"approve","amount":5000,"urgent":true}}`, cookie, csrf)
	var r refusal
	a.json(t, &r)
	var d wire.ErrorData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusUnprocessableEntity || r.Code != wire.CodePayloadInvalid || d.Gate != "review" || d.Location != "/amount" ||
		len(d.Violations) != 1 || d.Violations[0].Keyword != "maximum" || !strings.Contains(r.Error, "is above the maximum the schema allows") ||
		strings.Contains(a.body, "5000") {
		t.Fatalf("a payload the schema refuses: %d %s", a.status, a.body)
	}
	w.unchanged("a refused payload", "r-1", n)
	for _, tc := range []struct {
		body   string
		status int
		code   int
	}{
		{`{"id":"r-1","eventType":"other","payload":{"decision":"approve","amount":1}}`, http.StatusConflict, wire.CodeGateMismatch},
		{`{"id":"r-1","eventType":"review","payload":{"amount":1}}`, http.StatusUnprocessableEntity, wire.CodePayloadInvalid},
		{`{"id":"r-9","eventType":"review","payload":{"decision":"approve","amount":1}}`, http.StatusNotFound, wire.CodeExecutionNotFound},
	} {
		a := w.post("/api/act/resume", tc.body, cookie, csrf)
		var r refusal
		if a.json(t, &r); a.status != tc.status || r.Code != tc.code || r.Error == "" {
			t.Errorf("%s: %d %s; want %d with code %d", tc.body, a.status, a.body, tc.status, tc.code)
		}
	}
	w.unchanged("refused answers", "r-1", n)
	if st, err := w.rt.LoadState(context.Background(), "r-1"); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("r-1 after the refusals: %v %v", st.Status, err)
	}

	a = w.post("/api/act/resume", `{"id":"r-1","eventType":"review","payload":{"decision":"approve","amount":500,"urgent":true}}`, cookie, csrf)
	var res wire.ResumeResult
	if a.json(t, &res); a.status != http.StatusOK || res.ExecutionID != "r-1" {
		t.Fatalf("a good answer: %d %s", a.status, a.body)
	}
	done, err := w.rt.WaitForSettled(actCtx(t), "r-1")
	if err != nil || done.Status != fold.StatusCompleted || string(done.Variables.Output) != `"approve"` {
		t.Fatalf("r-1 after the answer: %v %s %v", done.Status, done.Variables.Output, err)
	}
}

// TestActionsCancelForkResumeAs: cancel records the reason, fork copies
// the log up to a sequence (simulated), and resume-as moves a failed
// execution onto its fixed flow with a new input; their refusals record
// nothing.
func TestActionsCancelForkResumeAs(t *testing.T) {
	w := newActWorld(t, nil, nil)
	w.start("r-1", "review", 1)
	w.start("r-2", "review", 2)
	cookie, csrf := w.login()

	// Fork r-1 after its step, simulated.
	at := w.log("r-1")[2].Sequence
	a := w.post("/api/act/fork", `{"id":"r-1","at":`+itoa(int(at))+`,"simulate":true}`, cookie, csrf)
	var fork wire.ForkResult
	if a.json(t, &fork); a.status != http.StatusOK || fork.ExecutionID == "" || fork.ExecutionID == "r-1" {
		t.Fatalf("fork: %d %s", a.status, a.body)
	}
	st, err := w.rt.WaitForSettled(actCtx(t), fork.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	var chain []struct {
		ExecutionID string `json:"executionId"`
		Sequence    int64  `json:"sequence"`
		Simulate    bool   `json:"simulate"`
	}
	if err := json.Unmarshal(st.Variables.ForkChain, &chain); err != nil || len(chain) != 1 || chain[0].ExecutionID != "r-1" ||
		chain[0].Sequence != at || !chain[0].Simulate {
		t.Fatalf("the fork's lineage: %s %v", st.Variables.ForkChain, err)
	}
	n := len(w.log("r-1"))
	if a := w.post("/api/act/fork", `{"id":"r-1","at":99}`, cookie, csrf); a.status != http.StatusUnprocessableEntity || a.refusal(t).Code != wire.CodeSequenceOutOfRange {
		t.Fatalf("a fork past the end: %d %s", a.status, a.body)
	}
	if a := w.post("/api/act/fork", `{"id":"r-1"}`, cookie, csrf); a.status != http.StatusBadRequest || !strings.Contains(a.body, "at is required") {
		t.Fatalf("a fork without at: %d %s", a.status, a.body)
	}
	w.unchanged("refused forks", "r-1", n)

	// Cancel r-2, with a reason; again, and it is refused.
	if a := w.post("/api/act/cancel", `{"id":"r-2","reason":"the customer withdrew"}`, cookie, csrf); a.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	cancelled, err := w.rt.WaitForSettled(actCtx(t), "r-2")
	log := w.log("r-2")
	if err != nil || cancelled.Status != fold.StatusCancelled || log[len(log)-1].Type != event.ExecutionCancelled ||
		!strings.Contains(string(log[len(log)-1].Payload), "the customer withdrew") {
		t.Fatalf("r-2 after cancel: %v %v, %s", cancelled.Status, err, log[len(log)-1].Payload)
	}
	if a := w.post("/api/act/cancel", `{"id":"r-2"}`, cookie, csrf); a.status != http.StatusConflict || a.refusal(t).Code != wire.CodeTerminal {
		t.Fatalf("a second cancel: %d %s", a.status, a.body)
	}
	w.unchanged("a second cancel", "r-2", len(log))

	// calc.v1 fails on 0: resume it as calc.v2 with the input 21.
	if failed := w.start("c-1", "calc.v1", 0); failed.Status != fold.StatusFailed {
		t.Fatalf("c-1: %v", failed.Status)
	}
	n = len(w.log("c-1"))
	if a := w.post("/api/act/resume-as", `{"id":"c-1","flowId":"calc.v9"}`, cookie, csrf); a.status != http.StatusNotFound || a.refusal(t).Code != wire.CodeUnknownFlow ||
		!strings.Contains(string(a.refusal(t).Data), `"calc.v2"`) {
		t.Fatalf("resume-as onto an unknown flow: %d %s", a.status, a.body)
	}
	w.unchanged("an unknown flow", "c-1", n)
	if a := w.post("/api/act/resume-as", `{"id":"c-1","flowId":"calc.v2","input":21}`, cookie, csrf); a.status != http.StatusOK {
		t.Fatalf("resume-as: %d %s", a.status, a.body)
	}
	again, err := w.rt.WaitForSettled(actCtx(t), "c-1")
	if err != nil || again.Status != fold.StatusCompleted || string(again.Variables.Output) != "42" {
		t.Fatalf("c-1 after resume-as: %v %s %v", again.Status, again.Variables.Output, err)
	}
	migrated := false
	for _, e := range w.log("c-1")[n:] {
		migrated = migrated || e.Type == event.ExecutionMigrated
	}
	if !migrated {
		t.Fatal("resume-as with an input recorded no EXECUTION_MIGRATED")
	}
}

// TestActionsResolveInDoubt: an execution whose charge was running when its
// process stopped parks in doubt; the gate says which attempt; a verdict on
// another attempt is refused with nothing recorded; done with an output
// completes it.
func TestActionsResolveInDoubt(t *testing.T) {
	events := crashedCharge(t, "p-1")
	w := newActWorld(t, events, nil)
	ctx := actCtx(t)
	if _, err := w.rt.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := w.rt.WaitForSuspend(ctx, "p-1"); err != nil || st.Variables.SuspendedOn.On != fold.GateInDoubt {
		t.Fatalf("p-1 is not in doubt: %v", err)
	}
	cookie, csrf := w.login()
	var g wire.GateResult
	if w.do("GET", "/api/gate?id=p-1", "", "Cookie", cookie).json(t, &g); g.Gate == nil || g.Gate.Kind != wire.GateInDoubt ||
		g.Gate.StepID != "charge" || g.Gate.Attempt == nil || *g.Gate.Attempt != 1 {
		t.Fatalf("the in-doubt gate: %+v", g.Gate)
	}
	n := len(w.log("p-1"))
	if a := w.post("/api/act/resolve", `{"id":"p-1","stepId":"charge","attempt":2}`, cookie, csrf); a.status != http.StatusUnprocessableEntity ||
		a.refusal(t).Code != wire.CodePayloadInvalid {
		t.Fatalf("a verdict on another attempt: %d %s", a.status, a.body)
	}
	if a := w.post("/api/act/resolve", `{"id":"p-1","stepId":"charge","attempt":1,"output":"x"}`, cookie, csrf); a.status != http.StatusBadRequest ||
		!strings.Contains(a.body, "output goes with done") {
		t.Fatalf("an output without done: %d %s", a.status, a.body)
	}
	if a := w.post("/api/act/resume", `{"id":"p-1","eventType":"__loom_indoubt__","payload":{}}`, cookie, csrf); a.status == http.StatusOK {
		t.Fatalf("a resume of an in-doubt park: %d %s", a.status, a.body)
	}
	w.unchanged("refused verdicts", "p-1", n)
	if a := w.post("/api/act/resolve", `{"id":"p-1","stepId":"charge","attempt":1,"done":true,"output":"ch-by-hand"}`, cookie, csrf); a.status != http.StatusOK {
		t.Fatalf("resolve: %d %s", a.status, a.body)
	}
	st, err := w.rt.WaitForSettled(ctx, "p-1")
	if err != nil || st.Status != fold.StatusCompleted || string(st.Variables.Output) != `"ch-by-hand"` {
		t.Fatalf("p-1 after the verdict: %v %s %v", st.Status, st.Variables.Output, err)
	}
}

// crashedCharge is a store holding what a crash leaves of execution id of
// pay: its log up to the charge's STEP_STARTED, its outcome never recorded.
func crashedCharge(t *testing.T, id string) *memstore.EventStore {
	t.Helper()
	ctx := actCtx(t)
	charging := make(chan struct{})
	crashed := memstore.NewEventStore()
	first, err := loom.New(loom.Config{Events: crashed, Flows: actFlows(func(ctx context.Context, _ int) (string, error) {
		close(charging)
		<-ctx.Done()
		return "", ctx.Err()
	}), Durability: loom.StepDurable, Recovery: loom.Recovery{Disabled: true},
		Logger: slog.New(slog.DiscardHandler)}) // its drive is cut short at Close, and says so
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Start(ctx, "pay", 7, loom.WithExecutionID(id)); err != nil {
		t.Fatal(err)
	}
	<-charging
	log, err := store.Read(ctx, crashed, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	events := memstore.NewEventStore()
	if err := events.Append(ctx, id, 0, log); err != nil {
		t.Fatal(err)
	}
	return events
}

// TestActionsWithAuthenticate: Options.Authenticate admits a request on
// its own grounds (here a proxy's header); such a caller opens a session
// at GET /api/session, and its POSTs need the session's csrf like a token
// login's; a request it refuses is 401.
func TestActionsWithAuthenticate(t *testing.T) {
	w := newActWorld(t, nil, func(o *inspect.Options) {
		o.Token = ""
		o.Authenticate = func(r *http.Request) (any, error) {
			if u := r.Header.Get("X-Proxy-User"); u != "" {
				return u, nil
			}
			return nil, errors.New("no proxy user")
		}
	})
	w.start("r-1", "review", 1)
	n := len(w.log("r-1"))
	if a := w.do("GET", "/api/executions", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("a request Authenticate refuses: %d", a.status)
	}
	if a := w.do("GET", "/?token="+loginToken, ""); a.status != http.StatusUnauthorized || a.header.Get("Set-Cookie") != "" {
		t.Fatalf("a token login without Options.Token: %d", a.status)
	}
	a := w.do("GET", "/api/session", "", "X-Proxy-User", "ann")
	var s struct {
		Actions bool   `json:"actions"`
		CSRF    string `json:"csrf"`
	}
	a.json(t, &s)
	cookies := (&http.Response{Header: a.header}).Cookies()
	if a.status != http.StatusOK || !s.Actions || s.CSRF == "" || len(cookies) != 1 {
		t.Fatalf("a session for the proxy's user: %d %s %v", a.status, a.body, cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	body := `{"id":"r-1","reason":"ann says so"}`
	if a := w.do("POST", "/api/act/cancel", body, "Content-Type", "application/json", "X-Proxy-User", "ann", inspect.CSRFHeader, s.CSRF); a.status != http.StatusForbidden ||
		!strings.Contains(a.body, "no session") {
		t.Fatalf("a POST without the session: %d %s", a.status, a.body)
	}
	w.unchanged("no session", "r-1", n)
	if a := w.do("POST", "/api/act/cancel", body, "Content-Type", "application/json", "Cookie", cookie, inspect.CSRFHeader, s.CSRF); a.status != http.StatusOK {
		t.Fatalf("a POST with the session: %d %s", a.status, a.body)
	}
	if st, err := w.rt.WaitForSettled(actCtx(t), "r-1"); err != nil || st.Status != fold.StatusCancelled {
		t.Fatalf("r-1: %v %v", st.Status, err)
	}
}

// TestActionsWhenTheAppFails: an app that refuses the inspector's own
// token is a 502 carrying its code; an app that does not answer is a 502
// that says the action may or may not have taken effect. Neither echoes a
// token.
func TestActionsWhenTheAppFails(t *testing.T) {
	w := newActWorld(t, nil, nil)
	w.start("r-1", "review", 1)
	n := len(w.log("r-1"))
	wrong, err := wire.NewClient(w.appURL, wire.WithToken("not-the-app-token"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := wire.NewClient("127.0.0.1:1", wire.WithToken(appToken))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"r-1","reason":"by a script"}`
	for _, tc := range []struct {
		actor inspect.Actor
		code  int
		says  string
	}{
		{wrong, wire.CodeUnauthenticated, "the app refused the inspector's own token"},
		{gone, 0, "could not reach the app"},
	} {
		in, err := inspect.New(inspect.Source{Events: w.events}, inspect.Options{Actions: tc.actor, Token: loginToken})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(in)
		other := &actWorld{t: t, url: srv.URL}
		a := other.do("POST", "/api/act/cancel", body, "Content-Type", "application/json", "Authorization", "Bearer "+loginToken)
		srv.Close()
		in.Close()
		r := a.refusal(t)
		if a.status != http.StatusBadGateway || r.Code != tc.code || !strings.Contains(r.Error, tc.says) {
			t.Errorf("an app that fails (%s): %d %s", tc.says, a.status, a.body)
		}
	}
	w.unchanged("failed calls", "r-1", n)
}

// TestActionsStatusOfCode pins the mapping of the app's refusals.
func TestActionsStatusOfCode(t *testing.T) {
	for code, want := range map[int]int{
		wire.CodeExecutionNotFound: 404, wire.CodeUnknownFlow: 404, wire.CodeNotSuspended: 409, wire.CodeTerminal: 409,
		wire.CodeBusy: 409, wire.CodePayloadInvalid: 422, wire.CodeInvalidParams: 422, wire.CodeDenied: 403,
		wire.CodeResumeUnauthorized: 403, wire.CodeUnauthenticated: 502, wire.CodeInternal: 502, wire.CodeUnavailable: 503,
		wire.CodeDeadlineExceeded: 504, wire.CodeNotConfigured: 501, wire.CodePayloadTooLarge: 413,
	} {
		if got := inspect.StatusOfCode(code); got != want {
			t.Errorf("StatusOfCode(%d) = %d, want %d", code, got, want)
		}
	}
}
