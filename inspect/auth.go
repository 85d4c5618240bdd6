package inspect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Limits of the inspector's login (Options.Token, Options.Authenticate).
const (
	// SessionLifetime is how long a session lasts from its login; past it
	// the page must be opened again with the link that logs in.
	SessionLifetime = 12 * time.Hour
	// MaxSessions caps the sessions held in memory: a login past it ends
	// the expired ones, then the oldest.
	MaxSessions = 256
	// MinTokenLength is the shortest Options.Token New accepts, in bytes.
	MinTokenLength = 16
)

// CSRFHeader is the request header a cookie session's POST must carry, set
// to the csrf that GET /api/session answered for the session.
const CSRFHeader = "X-Loom-CSRF"

// OptionsError is New refusing Options it cannot serve safely: Option
// names the field, Problem says what is wrong and what to do. Nothing is
// served.
type OptionsError struct {
	Option  string
	Problem string
}

func (e *OptionsError) Error() string { return "inspect: Options." + e.Option + ": " + e.Problem }

// caller is who an admitted request comes from: a bearer of the token (or
// of what Authenticate admits in an Authorization: Bearer header), which
// the browser never sends on its own, or the holder of a session cookie
// (session set), or a caller Authenticate admitted on other grounds
// (ambient: nil session until it opens one).
type caller struct {
	bearer    bool
	session   *session
	principal any
}

type callerKey struct{}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// session is one login: its CSRF token, its end and who logged in.
type session struct {
	csrf      string
	expires   time.Time
	principal any
}

// auth is the inspector's login: the token's digest, Authenticate, the
// session cookie's name (random per Inspector, so two inspectors on one
// host do not log each other out) and the sessions, by the SHA-256 of
// their cookie.
type auth struct {
	token        [32]byte
	hasToken     bool
	authenticate func(*http.Request) (any, error)
	now          func() time.Time
	cookie       string
	loginPage    []byte

	mu       sync.Mutex
	sessions map[[32]byte]*session
}

// newAuth checks the login options and returns the login, nil when
// neither Token nor Authenticate is set (no login: the read-only
// inspector of before). It refuses Actions without a login, and a Token
// shorter than MinTokenLength.
func newAuth(opts Options, static fs.FS) (*auth, error) {
	if opts.Token == "" && opts.Authenticate == nil {
		if opts.Actions != nil {
			return nil, &OptionsError{Option: "Actions", Problem: "actions change executions, so the inspector must know who asks: " +
				"set Options.Token (a secret the login link carries; loom inspect makes a random one) or Options.Authenticate"}
		}
		return nil, nil
	}
	if opts.Token != "" && len(opts.Token) < MinTokenLength {
		return nil, &OptionsError{Option: "Token", Problem: "a token must be at least 16 bytes, or it can be guessed: " +
			"use 32 random bytes (loom inspect makes such a token unless --inspect-token is given)"}
	}
	page, err := fs.ReadFile(static, "login.html")
	if err != nil {
		return nil, err
	}
	a := &auth{hasToken: opts.Token != "", authenticate: opts.Authenticate, now: opts.Now, loginPage: page,
		cookie: "loom_inspect_" + hex.EncodeToString(randomBytes(6)), sessions: map[[32]byte]*session{}}
	if a.now == nil {
		a.now = time.Now
	}
	a.token = sha256.Sum256([]byte(opts.Token))
	return a, nil
}

// randomBytes is n bytes from crypto/rand, which never fails (Go 1.24).
func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomText() string { return base64.RawURLEncoding.EncodeToString(randomBytes(32)) }

// tokenIs compares a presented token with Options.Token in time that
// depends on neither.
func (a *auth) tokenIs(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return a.hasToken && subtle.ConstantTimeCompare(sum[:], a.token[:]) == 1
}

// admit is the login gate of every request: GET /?token= logs in; a
// request with a session, the token as a bearer, or what Authenticate
// admits goes on with its caller on its context; any other is refused
// (401), the API with a JSON error and every other path with the login
// page. It answers the request itself when it returns false.
func (in *Inspector) admit(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	a := in.auth
	if a == nil {
		return r, true
	}
	if a.hasToken && r.URL.Path == "/" && r.URL.Query().Has("token") {
		in.login(w, r)
		return nil, false
	}
	c, ok := a.callerOf(w, r)
	if !ok {
		in.unauthenticated(w, r)
		return nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), true
}

// callerOf authenticates r. An Authorization: Bearer header must be the
// token, or admitted by Authenticate; else a live session cookie admits;
// else Authenticate may admit r on other grounds, and then the page (GET
// /) and GET /api/session open a session for it, whose cookie this
// response sets.
func (a *auth) callerOf(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if a.tokenIs(strings.TrimSpace(cred)) {
			return caller{bearer: true}, true
		}
		if a.authenticate == nil {
			return caller{}, false
		}
		p, err := a.authenticate(r)
		return caller{bearer: true, principal: p}, err == nil
	}
	if s := a.sessionOf(r); s != nil {
		return caller{session: s, principal: s.principal}, true
	}
	if a.authenticate == nil {
		return caller{}, false
	}
	p, err := a.authenticate(r)
	if err != nil {
		return caller{}, false
	}
	c := caller{principal: p}
	if r.Method == http.MethodGet && (r.URL.Path == "/" || r.URL.Path == "/api/session") {
		c.session = a.open(w, r, p)
	}
	return c, true
}

// sessionOf is the live session r's cookie names, nil without one.
func (a *auth) sessionOf(r *http.Request) *session {
	ck, err := r.Cookie(a.cookie)
	if err != nil {
		return nil
	}
	key := sha256.Sum256([]byte(ck.Value))
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[key]
	if s == nil {
		return nil
	}
	if !a.now().Before(s.expires) {
		delete(a.sessions, key)
		return nil
	}
	return s
}

// open starts a session for principal and sets its cookie on w: HttpOnly
// (no script reads it), SameSite=Strict (no other site's page sends it),
// Path=/, Secure when r came over TLS. Past MaxSessions it first ends the
// expired sessions, then the oldest.
func (a *auth) open(w http.ResponseWriter, r *http.Request, principal any) *session {
	value := randomText()
	now := a.now()
	s := &session{csrf: randomText(), expires: now.Add(SessionLifetime), principal: principal}
	a.mu.Lock()
	if len(a.sessions) >= MaxSessions {
		a.evict(now)
	}
	a.sessions[sha256.Sum256([]byte(value))] = s
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: a.cookie, Value: value, Path: "/", MaxAge: int(SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return s
}

// evict ends the expired sessions, and the oldest one when none had
// expired. a.mu is held.
func (a *auth) evict(now time.Time) {
	var oldest [32]byte
	var first time.Time
	for key, s := range a.sessions { //loom:order-independent removal, and a minimum
		if !now.Before(s.expires) {
			delete(a.sessions, key)
		} else if first.IsZero() || s.expires.Before(first) {
			oldest, first = key, s.expires
		}
	}
	if len(a.sessions) >= MaxSessions {
		delete(a.sessions, oldest)
	}
}

// login is GET /?token=: the right token opens a session (unless the
// request has one) and redirects (303) to the same address without the
// token, so it stays out of the history and of every later request; a
// wrong one sets nothing and answers the login page.
func (in *Inspector) login(w http.ResponseWriter, r *http.Request) {
	a := in.auth
	q := r.URL.Query()
	if !a.tokenIs(q.Get("token")) {
		in.unauthenticated(w, r)
		return
	}
	if a.sessionOf(r) == nil {
		a.open(w, r, nil)
	}
	q.Del("token")
	target := "./" // relative: right under a prefix an app mounts the inspector at, too
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	w.Header().Set("Location", target)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
}

// unauthenticated refuses a request without a login: 401, with a JSON
// error under /api/ and the login page elsewhere.
func (in *Inspector) unauthenticated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="loom inspect"`)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		in.writeError(w, http.StatusUnauthorized, "not logged in: open the link loom inspect printed (it carries the token), "+
			"or send Authorization: Bearer <token>")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	if r.Method != http.MethodHead {
		_, _ = w.Write(in.auth.loginPage) // a failed write is a page gone: nothing to do
	}
}

// csrfRefusal says why a POST from c may have been forged by another
// page, "" when it is not: a cookie session's POST must carry CSRFHeader
// with the session's csrf, an Origin (when sent) of the inspector's own
// host, and a Sec-Fetch-Site (when sent) of same-origin. A bearer needs
// none of it: no browser sends a bearer token on its own.
func csrfRefusal(r *http.Request, c caller) string {
	if c.bearer {
		return ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "refused: the request came from another site (Sec-Fetch-Site " + site + "); nothing was sent to the app"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return "refused: the request came from another origin than the inspector's; nothing was sent to the app"
		}
	}
	if c.session == nil {
		return "refused: no session to check the request against: open the inspector's page (or GET /api/session) and send its csrf in " +
			CSRFHeader + ", or send Authorization: Bearer <token>; nothing was sent to the app"
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.session.csrf)) != 1 {
		return "refused: the " + CSRFHeader + " header is missing or is not this session's csrf (GET /api/session answers it); " +
			"nothing was sent to the app"
	}
	return ""
}

// sessionInfo is GET /api/session: whether the page may act, and the csrf
// of the caller's cookie session (none for a bearer, or without a login).
func (in *Inspector) sessionInfo(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Actions bool   `json:"actions"`
		Check   bool   `json:"check"`
		CSRF    string `json:"csrf,omitempty"`
	}{Actions: in.opts.Actions != nil, Check: in.opts.Check != nil}
	if s := callerOf(r).session; s != nil {
		out.CSRF = s.csrf
	}
	in.writeJSON(w, out)
}
