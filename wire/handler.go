package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
)

// Options configures Handler. The defaults (the zero value of each field):
//
//   - Authenticate: none, which Handler refuses unless Insecure is set;
//   - MaxRequestBytes: DefaultMaxRequestBytes (1 MiB);
//   - Timeout: DefaultTimeout (30 s) per call, subscriptions excepted;
//   - MaxBatch: DefaultMaxBatch (16) requests per JSON-RPC batch;
//   - Heartbeat: DefaultHeartbeat (15 s) between keep-alive comments on an
//     idle event stream;
//   - Logger: none (unmapped errors are then not logged anywhere).
type Options struct {
	// Events is the runtime's event store, the one in its loom.Config.
	// Required: execution.events reads it and execution.subscribe follows
	// it (through store.Subscriber). The runtime does not expose its store,
	// so the app hands the same value to both.
	Events store.EventStore
	// Authenticate identifies the caller of every request, subscriptions
	// included, before anything else is read. A nil error admits the request
	// and principal is attached to its context with loom.WithPrincipal, so
	// the runtime's Authorizer sees it (and EXECUTION_STARTED records it);
	// an error refuses it with CodeUnauthenticated and HTTP 401, and the
	// error's text is never sent. BearerToken builds one.
	Authenticate func(r *http.Request) (principal any, err error)
	// Insecure must be set to build a Handler without Authenticate: then
	// every caller that reaches the socket may start, resume, cancel and
	// read executions. Only for a loopback listener in a trusted test.
	Insecure bool
	// MaxRequestBytes caps a request body; a bigger one is refused with
	// CodeRequestTooLarge (HTTP 413) before it is parsed.
	MaxRequestBytes int64
	// Timeout bounds each call (a Wait included); past it the caller gets
	// CodeDeadlineExceeded.
	Timeout time.Duration
	// MaxBatch caps the requests of one JSON-RPC batch.
	MaxBatch int
	// Heartbeat is the interval of keep-alive comments on event streams.
	Heartbeat time.Duration
	// Logger receives unmapped (internal) errors, which callers see only as
	// "internal error".
	Logger *slog.Logger

	// ReadModels is the read-model store readmodel.query and
	// readmodel.watch (1.3.0) read; without it they are refused with
	// CodeNotConfigured (data.field "ReadModels").
	ReadModels store.ReadModelStore
	// ReadModelChanges, when set, is the projection runner of this process:
	// its applies wake every readmodel.watch at once. Other writers (other
	// processes) are seen at the next ReadModelPoll.
	ReadModelChanges *projection.Runner
	// ReadModelPoll is how often a readmodel.watch re-reads its query
	// (projection.DefaultLivePoll when zero).
	ReadModelPoll time.Duration
	// AuthorizeQuery, when set, admits each read-model query: principal is
	// what Authenticate returned (nil without it); an error refuses the
	// query with CodeDenied, and its text is never sent. Without it, every
	// caller Authenticate admits may read every read model.
	AuthorizeQuery func(ctx context.Context, principal any, q store.ReadModelQuery) error
}

// Defaults of Options.
const (
	DefaultMaxRequestBytes = 1 << 20
	DefaultTimeout         = 30 * time.Second
	DefaultMaxBatch        = 16
	DefaultHeartbeat       = 15 * time.Second
)

// ErrInvalidOptions matches *OptionsError.
var ErrInvalidOptions = errors.New("wire: invalid options")

// OptionsError is Handler's refusal of its options: Field names the option
// and Reason says what to do. Nothing was built.
type OptionsError struct {
	Field  string
	Reason string
}

func (e *OptionsError) Error() string { return "wire: Options." + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidOptions) true.
func (e *OptionsError) Is(target error) bool { return target == ErrInvalidOptions }

// handler serves the wire ABI for one runtime.
type handler struct {
	rt   *loom.Runtime
	opts Options
}

// Handler returns the http.Handler of the wire ABI over rt: JSON-RPC 2.0
// requests POSTed to any path it is mounted at (conventionally Path), the
// subscribe stream included. It is safe for concurrent use.
//
// It refuses, with an *OptionsError, a nil runtime, a nil Options.Events,
// negative limits, and a missing Options.Authenticate unless Options.Insecure
// is set explicitly — the wire is authenticated by default. Bind it to
// loopback with Listen unless it must be reached from elsewhere.
//
// Every call goes through the runtime's public API, so the runtime's rules
// hold on the wire exactly as in process: a resume passes the ingress gate
// (rt.Resume), the Authorizer sees the authenticated principal, and every
// refusal appends nothing.
func Handler(rt *loom.Runtime, opts Options) (http.Handler, error) {
	switch {
	case rt == nil:
		return nil, &OptionsError{Field: "runtime", Reason: "a *loom.Runtime is required"}
	case opts.Events == nil:
		return nil, &OptionsError{Field: "Events", Reason: "set it to the runtime's event store (the Events of its loom.Config)"}
	case opts.Authenticate == nil && !opts.Insecure:
		return nil, &OptionsError{Field: "Authenticate", Reason: "the wire ABI is authenticated by default: set Authenticate " +
			"(wire.BearerToken, for example), or set Insecure explicitly for a trusted loopback-only setup"}
	case opts.MaxRequestBytes < 0, opts.Timeout < 0, opts.MaxBatch < 0, opts.Heartbeat < 0, opts.ReadModelPoll < 0:
		return nil, &OptionsError{Field: "MaxRequestBytes/Timeout/MaxBatch/Heartbeat/ReadModelPoll", Reason: "must not be negative (zero means the default)"}
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &handler{rt: rt, opts: opts}, nil
}

// request is a JSON-RPC 2.0 request object as parseRequest read it off the
// wire (its jsonrpc member checked and dropped).
type request struct {
	// ID is the id to answer with, valid JSON: nil for a notification.
	ID     json.RawMessage
	Method string
	// Params are the raw params, decoded by decodeParams; nil when absent.
	Params json.RawMessage
}

// response is a JSON-RPC 2.0 response object.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.writeJSON(w, http.StatusMethodNotAllowed, errorResponse(nil,
			newError(CodeInvalidRequest, "JSON-RPC requests are POSTed", nil)))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		h.writeJSON(w, http.StatusUnsupportedMediaType, errorResponse(nil,
			newError(CodeInvalidRequest, "the body must be application/json", nil)))
		return
	}
	ctx := r.Context()
	if h.opts.Authenticate != nil {
		principal, err := h.opts.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
			h.writeJSON(w, http.StatusUnauthorized, errorResponse(nil,
				newError(CodeUnauthenticated, "unauthenticated: send valid credentials (Authorization: Bearer <token>)", nil)))
			return
		}
		ctx = withPrincipal(ctx, principal)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.writeJSON(w, http.StatusRequestEntityTooLarge, errorResponse(nil, newError(CodeRequestTooLarge,
				"the request body is over the server's cap", map[string]any{"limit": h.opts.MaxRequestBytes})))
			return
		}
		h.writeJSON(w, http.StatusBadRequest, errorResponse(nil, newError(CodeParseError, "the request body could not be read", nil)))
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		h.serveBatch(ctx, w, body)
		return
	}
	req, rerr := parseRequest(body)
	if rerr != nil {
		h.writeJSON(w, http.StatusOK, errorResponse(req.ID, rerr))
		return
	}
	if req.Method == MethodSubscribe {
		h.serveSubscribe(ctx, w, r, req)
		return
	}
	if req.Method == MethodWatch {
		h.serveWatch(ctx, w, r, req)
		return
	}
	if req.Method == MethodReadModelWatch {
		h.serveReadModelWatch(ctx, w, r, req)
		return
	}
	resp, notify := h.call(ctx, req)
	if notify {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.writeJSON(w, http.StatusOK, resp)
}

// serveBatch answers a JSON-RPC batch: each request on its own, the
// responses in request order, notifications without one.
func (h *handler) serveBatch(ctx context.Context, w http.ResponseWriter, body []byte) {
	raw, err := splitBatch(body)
	if !isJSON(body) || err != nil {
		h.writeJSON(w, http.StatusOK, errorResponse(nil, newError(CodeParseError,
			"the body is not JSON: send one JSON-RPC 2.0 request object, or an array of them", nil)))
		return
	}
	if len(raw) == 0 || len(raw) > h.opts.MaxBatch {
		h.writeJSON(w, http.StatusOK, errorResponse(nil, newError(CodeInvalidRequest,
			"a batch holds 1 to "+itoa(h.opts.MaxBatch)+" requests", nil)))
		return
	}
	out := []response{}
	for _, one := range raw {
		req, rerr := parseRequest(one)
		switch {
		case rerr != nil:
			out = append(out, errorResponse(req.ID, rerr))
		case req.Method == MethodSubscribe, req.Method == MethodWatch, req.Method == MethodReadModelWatch:
			out = append(out, errorResponse(req.ID, newError(CodeInvalidRequest, req.Method+" cannot be batched", nil)))
		default:
			if resp, notify := h.call(ctx, req); !notify {
				out = append(out, resp)
			}
		}
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.writeJSON(w, http.StatusOK, out)
}

// call runs one request under the call timeout. notify reports a
// notification (no id), which gets no response.
func (h *handler) call(ctx context.Context, req request) (resp response, notify bool) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	result, err := h.dispatch(ctx, req.Method, req.Params)
	if req.ID == nil {
		return response{}, true
	}
	if err != nil {
		return errorResponse(req.ID, h.wireError(req.Method, err)), false
	}
	return response{JSONRPC: "2.0", ID: req.ID, Result: result}, false
}

// wireError maps err and logs the unmapped ones.
func (h *handler) wireError(method string, err error) *Error {
	e, internal := errorFor(err)
	if internal {
		h.opts.Logger.Error("wire: internal error", "method", method, "error", err)
	}
	var pv *loom.ResumePayloadValidationError
	if method == MethodResume && errors.As(err, &pv) && pv.Gate == fold.GateInDoubt {
		// Answered by a verdict, which is another method.
		e = &Error{Code: e.Code, Message: e.Message + "; answer it with execution.resolve (loom resolve " +
			pv.ExecutionID + " --done OUTPUT, or --rerun)", Data: e.Data}
	}
	return e
}

func errorResponse(id json.RawMessage, e *Error) response {
	if id == nil {
		id = json.RawMessage("null")
	}
	return response{JSONRPC: "2.0", ID: id, Error: e}
}

// writeJSON writes v, a response or a batch of them. What it writes is
// always valid JSON in valid UTF-8 (see encodeResponse).
func (h *handler) writeJSON(w http.ResponseWriter, status int, v any) {
	b := h.encodeResponse(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a failed write is the caller gone: nothing to do
}

// internalResponse is the answer of last resort, when nothing else encodes.
const internalResponse = `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`

// encodeResponse encodes a response or a batch of them. A response that
// does not encode as valid JSON in valid UTF-8 — a stored payload that is
// not UTF-8, say, which encoding/json would copy through raw — is logged
// and replaced by an internal error with the same id (ids are checked when
// the request is read), so the JSON-RPC layer never emits invalid JSON; in a
// batch only that response is replaced.
func (h *handler) encodeResponse(v any) []byte {
	b, err := marshalValid(v)
	if err == nil {
		return b
	}
	h.opts.Logger.Error("wire: encoding a response", "error", err)
	switch v := v.(type) {
	case response:
		if b, err := marshalValid(errorResponse(v.ID, newError(CodeInternal, "internal error", nil))); err == nil {
			return b
		}
	case []response:
		parts := make([][]byte, len(v))
		for i, r := range v {
			parts[i] = h.encodeResponse(r)
		}
		return append(append([]byte("["), bytes.Join(parts, []byte(","))...), ']')
	}
	return []byte(internalResponse)
}

// errInvalidOutput refuses to send bytes that are not valid JSON in UTF-8.
var errInvalidOutput = errors.New("wire: the encoded value is not valid JSON in UTF-8")

// marshalValid is marshal that refuses output other than valid JSON in
// valid UTF-8: encoding/json copies a json.RawMessage's bytes through
// without checking their UTF-8.
func marshalValid(v any) ([]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) || !json.Valid(b) {
		return nil, errInvalidOutput
	}
	return b, nil
}

// marshal encodes without HTML escaping, so payloads keep their bytes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
