package workerhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/loom-kernel/loom/dispatch"
)

// Path is the one endpoint of the worker protocol.
const Path = "/execute"

// Defaults of Options.
const (
	// DefaultMaxBodyBytes caps a request body: 1 MiB, which every package
	// valid under dispatch.MaxPayloadBytes fits.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultTimeout bounds one package's run to its settle point.
	DefaultTimeout = 5 * time.Minute
	// DefaultMaxConcurrent bounds the packages a server runs at once.
	DefaultMaxConcurrent = 64
)

// Options configures NewServer. The defaults (the zero value of each field):
//
//   - Authenticate: none, which NewServer refuses unless Insecure is set;
//   - MaxBodyBytes: DefaultMaxBodyBytes (1 MiB);
//   - Timeout: DefaultTimeout (5 min) per package;
//   - MaxConcurrent: DefaultMaxConcurrent (64) packages at once;
//   - Logger: none (unmapped errors are then logged nowhere).
type Options struct {
	// Authenticate admits a request (nil error) or refuses it with HTTP 401
	// and CodeUnauthenticated, before the path, the method or the body is
	// looked at; the error's text is never sent. BearerToken builds one.
	Authenticate func(r *http.Request) error
	// Insecure must be set to build a Server without Authenticate: then
	// whoever reaches the socket runs packages, starting and resuming any
	// execution of the worker's flows. Only for a loopback listener in a
	// trusted test; Serve refuses it on any other.
	Insecure bool
	// MaxBodyBytes caps a request body; a bigger one is refused with HTTP
	// 413 and CodeBodyTooLarge before it is parsed.
	MaxBodyBytes int64
	// Timeout bounds each package's run; past it the caller gets HTTP 504
	// and CodeDeadlineExceeded while the execution runs on in the runtime.
	Timeout time.Duration
	// MaxConcurrent bounds the packages running at once; a package beyond
	// it is shed at once with HTTP 503 and CodeBusy (retryable), so the
	// dispatcher backs off or goes elsewhere instead of queueing here.
	MaxConcurrent int
	// Logger receives unmapped errors, which callers see as "internal".
	Logger *slog.Logger
}

// ErrInvalidOptions matches *OptionsError.
var ErrInvalidOptions = errors.New("workerhttp: invalid options")

// OptionsError refuses a server's or a client's options: Field names the
// option and Reason says what to do. Nothing was built.
type OptionsError struct {
	Field  string
	Reason string
}

func (e *OptionsError) Error() string { return "workerhttp: " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidOptions) true.
func (e *OptionsError) Is(target error) bool { return target == ErrInvalidOptions }

// Server is the worker side of the protocol: an http.Handler that runs each
// package POSTed to Path on its WorkerRuntime and answers the result, at
// most Options.MaxConcurrent at once. It is safe for concurrent use.
type Server struct {
	worker dispatch.WorkerRuntime
	opts   Options
	slots  chan struct{}
}

// NewServer builds a worker server over worker. It refuses, with an
// *OptionsError, a nil worker, negative limits, and a missing Authenticate
// unless Insecure is set explicitly: the worker protocol is authenticated by
// default.
func NewServer(worker dispatch.WorkerRuntime, opts Options) (*Server, error) {
	switch {
	case worker == nil:
		return nil, &OptionsError{Field: "worker", Reason: "a dispatch.WorkerRuntime is required (a *dispatch.LocalWorker, say)"}
	case opts.Authenticate == nil && !opts.Insecure:
		return nil, &OptionsError{Field: "Options.Authenticate", Reason: "the worker protocol is authenticated by default: set Authenticate " +
			"(workerhttp.BearerToken, for example), or set Insecure explicitly for a trusted loopback-only setup"}
	case opts.MaxBodyBytes < 0, opts.Timeout < 0, opts.MaxConcurrent < 0:
		return nil, &OptionsError{Field: "Options.MaxBodyBytes/Timeout/MaxConcurrent", Reason: "must not be negative (zero means the default)"}
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxConcurrent == 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{worker: worker, opts: opts, slots: make(chan struct{}, opts.MaxConcurrent)}, nil
}

// ServeHTTP answers one request: authentication, then the path, the method,
// the content type and the body cap, then the package runs. See the package
// doc for every status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Authenticate != nil {
		if err := s.opts.Authenticate(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loom-worker"`)
			s.refuse(w, http.StatusUnauthorized, CodeUnauthenticated, "send valid credentials (Authorization: Bearer <token>)")
			return
		}
	}
	if r.URL.Path != Path {
		s.refuse(w, http.StatusNotFound, CodeNotFound, "the worker protocol has one endpoint: POST "+Path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "packages are POSTed")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.refuse(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the body must be application/json")
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	pkg, err := dispatch.DecodePackage(body)
	if err != nil {
		s.fail(w, pkg, err)
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refuse(w, http.StatusServiceUnavailable, CodeBusy, "the worker is at its concurrency limit: dispatch again")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	res, err := s.worker.Execute(ctx, pkg)
	if err != nil {
		s.fail(w, pkg, err)
		return
	}
	s.writeJSON(w, http.StatusOK, res)
}

// readBody reads the body under the cap, answering 413 past it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	tooBig := func() ([]byte, bool) {
		s.refuse(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"the request body is over the server's cap of "+strconv.FormatInt(s.opts.MaxBodyBytes, 10)+" bytes")
		return nil, false
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		return tooBig()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooBig()
		}
		s.refuse(w, http.StatusBadRequest, CodeInvalidPackage, "the request body could not be read")
		return nil, false
	}
	return body, true
}

// fail answers an Execute (or decode) error, logging the unmapped ones by
// the package's coordinates only.
func (s *Server) fail(w http.ResponseWriter, pkg dispatch.ExecutionPackage, err error) {
	status, obj, internal := errorFor(err)
	if internal {
		s.opts.Logger.Error("workerhttp: internal error", "package", pkg, "error", err)
	}
	s.writeJSON(w, status, errorBody{Error: obj})
}

func (s *Server) refuse(w http.ResponseWriter, status int, code, message string) {
	s.writeJSON(w, status, errorBody{Error: ErrorObject{Code: code, Message: message}})
}

// writeJSON writes v without HTML escaping, so an output keeps its bytes.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.opts.Logger.Error("workerhttp: encoding a response", "error", err)
		status, buf = http.StatusInternalServerError, *bytes.NewBufferString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a failed write is the caller gone: nothing to do
}
