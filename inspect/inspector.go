package inspect

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/store"
)

//go:embed assets
var assets embed.FS

// Page sizes of the JSON API.
const (
	DefaultExecutionsPage = 50
	MaxExecutionsPage     = 500
	DefaultEventsPage     = 500
	MaxEventsPage         = 5000
)

// Options configures New. The defaults (zero values): requests are served
// only when their Host is a loopback name or address, nothing is logged,
// and a live list re-lists the store every DefaultListPoll.
type Options struct {
	// AnyHost serves requests whatever their Host header. Without it a
	// request for another host is refused (421), which keeps a web page on
	// another origin from reading the inspector through DNS rebinding.
	AnyHost bool
	// Logger receives the errors callers see only as "internal error".
	Logger *slog.Logger
	// ListPoll is how often each live list (/api/executions/live) re-lists
	// the store: one listing per interval per open list, refolding only
	// the executions whose log grew. Zero means DefaultListPoll; less than
	// MinListPoll is raised to it.
	ListPoll time.Duration

	// Check, when set, judges an execution's log against the running
	// app's code (GET /api/check): the page marks where a replay would
	// diverge and a code-pin mismatch. A *wire.Client of the app, or
	// RuntimeChecker(rt) in the app's process. Reads only; it needs no
	// login of its own.
	Check Checker

	// Actions, when set, lets the page act on the running app it reaches
	// through the wire ABI: answer a gate, cancel, fork, resume as,
	// resolve an in-doubt step (the POST /api/act/ endpoints, doc.go). It
	// should be the app that writes the store the inspector reads. New
	// refuses it without Token or Authenticate (*OptionsError).
	Actions Actor
	// Token, when set, is the inspector's login: GET /?token=<Token>
	// opens a session (a cookie) and redirects to the page without it, and
	// "Authorization: Bearer <Token>" admits a script without a session.
	// With Token or Authenticate set, every request needs one or the
	// other (401 without). At least MinTokenLength bytes.
	Token string
	// Authenticate, when set, admits a request the token does not: an
	// error refuses it (401; its text is never sent). A request it admits
	// through an Authorization: Bearer header is a script's; any other
	// opens a session at GET / or GET /api/session, whose POSTs need the
	// session's csrf like a token login's.
	Authenticate func(r *http.Request) (principal any, err error)
	// Now is the clock sessions expire by (SessionLifetime); nil is
	// time.Now.
	Now func() time.Time
}

// Inspector is the web inspector: an http.Handler serving the page (assets
// embedded in the binary, no CDN, no build step) and its JSON API over a
// Source. Every request that is not GET or HEAD is refused (405), but the
// POSTs of the action endpoints when Options.Actions is set. It is safe
// for concurrent use.
type Inspector struct {
	src    Source
	opts   Options
	auth   *auth
	mux    *http.ServeMux
	stop   chan struct{}
	closer sync.Once
}

// New builds an Inspector over src. It refuses a Source without Events,
// and Options it cannot serve safely with an *OptionsError: Actions
// without Token or Authenticate, a Token shorter than MinTokenLength.
func New(src Source, opts Options) (*Inspector, error) {
	if src.Events == nil {
		return nil, errors.New("inspect: Source.Events is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ListPoll == 0 {
		opts.ListPoll = DefaultListPoll
	}
	opts.ListPoll = max(opts.ListPoll, MinListPoll)
	in := &Inspector{src: src, opts: opts, mux: http.NewServeMux(), stop: make(chan struct{})}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	if in.auth, err = newAuth(opts, static); err != nil {
		return nil, err
	}
	in.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	in.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	in.listRoutes()
	in.mux.HandleFunc("GET /api/events", in.events)
	in.mux.HandleFunc("GET /api/log", in.download)
	in.mux.HandleFunc("GET /api/state", in.state)
	in.mux.HandleFunc("GET /api/refs", in.refs)
	in.mux.HandleFunc("GET /api/live", in.live)
	in.mux.HandleFunc("GET /api/watch", in.watch)
	in.mux.HandleFunc("GET /api/check", in.check)
	in.actionRoutes()
	return in, nil
}

// Close ends every live stream (so a server shutting down is not held by
// open pages) and refuses new ones. Other requests are still served.
func (in *Inspector) Close() { in.closer.Do(func() { close(in.stop) }) }

func (in *Inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if !in.opts.AnyHost && !loopbackHost(r.Host) {
		http.Error(w, "the inspector answers only to a loopback host name", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !in.acts(r) {
		w.Header().Set("Allow", "GET, HEAD")
		msg := "the inspector is read-only"
		if in.opts.Actions != nil {
			msg = "the inspector takes a POST only at its action endpoints (/api/act/…)"
		}
		http.Error(w, msg, http.StatusMethodNotAllowed)
		return
	}
	r, ok := in.admit(w, r)
	if !ok {
		return
	}
	in.mux.ServeHTTP(w, r)
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (in *Inspector) events(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	from, ok := in.intParam(w, r, "from", 0, -1)
	if !ok {
		return
	}
	limit, ok := in.intParam(w, r, "limit", DefaultEventsPage, MaxEventsPage)
	if !ok {
		return
	}
	evs, err := store.ReadRange(r.Context(), in.src.Events, id, int64(from), int64(from+limit+1))
	if err != nil {
		in.fail(w, err)
		return
	}
	out := struct {
		Events []event.Envelope `json:"events"`
		Next   *int64           `json:"next,omitempty"`
	}{Events: evs}
	if len(evs) > limit {
		out.Events = evs[:limit]
		next := int64(from + limit)
		out.Next = &next
	}
	if out.Events == nil {
		out.Events = []event.Envelope{}
	}
	in.writeJSON(w, out)
}

func (in *Inspector) state(w http.ResponseWriter, r *http.Request) {
	at, ok := in.intParam(w, r, "at", -1, -1)
	if !ok {
		return
	}
	st, err := in.src.StateAt(r.Context(), r.URL.Query().Get("id"), int64(at))
	if err != nil {
		in.fail(w, err)
		return
	}
	b, err := fold.Encode(st)
	if err != nil {
		in.fail(w, err)
		return
	}
	in.writeJSON(w, struct {
		State json.RawMessage `json:"state"`
	}{b})
}

func (in *Inspector) refs(w http.ResponseWriter, r *http.Request) {
	refs := []store.Ref{}
	if in.src.Branches != nil {
		got, err := in.src.Branches.ListRefs(r.Context(), r.URL.Query().Get("prefix"))
		if err != nil {
			in.fail(w, err)
			return
		}
		refs = append(refs, got...)
	}
	in.writeJSON(w, struct {
		Refs []store.Ref `json:"refs"`
	}{refs})
}

// intParam reads an integer query parameter (def when absent), refusing a
// malformed or negative one; a positive ceiling caps it.
func (in *Inspector) intParam(w http.ResponseWriter, r *http.Request, name string, def, ceiling int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		in.writeError(w, http.StatusBadRequest, name+" must be a whole number, 0 or more")
		return 0, false
	}
	if ceiling > 0 {
		n = min(n, ceiling)
	}
	return n, true
}

// fail answers an error with what the caller can act on.
func (in *Inspector) fail(w http.ResponseWriter, err error) {
	var se *SequenceError
	var bad *event.InvalidEnvelopeError
	var badQuery *store.InvalidCatalogQueryError
	switch {
	case errors.As(err, &badQuery) && badQuery.Field == "after":
		in.writeError(w, http.StatusBadRequest, "after must be the next of the page before, as the list answered it")
	case errors.As(err, &badQuery):
		in.writeError(w, http.StatusBadRequest, badQuery.Error())
	case errors.Is(err, loom.ErrExecutionNotFound):
		in.writeError(w, http.StatusNotFound, "no such execution in this store")
	case errors.As(err, &se):
		in.writeError(w, http.StatusNotFound, se.Error())
	case errors.As(err, &bad):
		in.writeError(w, http.StatusBadRequest, bad.Error())
	default:
		in.opts.Logger.Error("inspect: request failed", "error", err)
		in.writeError(w, http.StatusInternalServerError, "internal error reading the store")
	}
}

func (in *Inspector) writeError(w http.ResponseWriter, status int, msg string) {
	in.write(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

func (in *Inspector) writeJSON(w http.ResponseWriter, v any) { in.write(w, http.StatusOK, v) }

func (in *Inspector) write(w http.ResponseWriter, status int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		in.opts.Logger.Error("inspect: encoding a response", "error", err)
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a failed write is a page gone: nothing to do
}

// encodeJSON is the API's JSON: compact, on one line, payload bytes kept
// (no HTML escaping).
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
