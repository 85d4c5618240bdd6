package workerhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/internal/loopback"
)

// DefaultMaxResponseBytes caps a worker's answer: room for an output at the
// event store's default payload cap, and the JSON around it.
const DefaultMaxResponseBytes = event.DefaultMaxPayloadBytes + 64<<10

// ClientOptions configures NewRemoteWorker. The defaults (the zero value of
// each field):
//
//   - HTTPClient: a client of its own (http.DefaultTransport, no overall
//     timeout: the ctx of each Execute bounds it);
//   - Token and Authorize: none — the request carries no credentials;
//   - MaxResponseBytes: DefaultMaxResponseBytes;
//   - AllowPlainHTTP: false.
type ClientOptions struct {
	// HTTPClient sends the requests. Its CheckRedirect is replaced (on a
	// copy): redirects are never followed, so credentials never reach
	// another host.
	HTTPClient *http.Client
	// Token is sent as "Authorization: Bearer <token>" (the server's
	// BearerToken).
	Token string
	// Authorize, when set, is called on every request before it is sent, to
	// add other credentials (a signed header, a cloud identity token). An
	// error fails the Execute before anything is sent.
	Authorize func(r *http.Request) error
	// MaxResponseBytes caps the answer read; a bigger one is a
	// *ProtocolError.
	MaxResponseBytes int64
	// AllowPlainHTTP lets credentials (Token, Authorize) go over http:// to
	// a host that is not loopback, where anyone on the path can read them.
	// Without it NewRemoteWorker refuses that combination.
	AllowPlainHTTP bool
}

// RemoteWorker is the dispatch.WorkerRuntime of a worker server across the
// network: Execute POSTs the package to <baseURL>/execute and decodes the
// answer. It is safe for concurrent use.
type RemoteWorker struct {
	endpoint string
	client   *http.Client
	opts     ClientOptions
}

// NewRemoteWorker builds the client of the worker server at baseURL (an
// http or https URL with a host, no query or fragment; a path prefix is
// kept). It refuses, with an *OptionsError, a malformed URL, a token that is
// not a valid header value, a negative MaxResponseBytes, and credentials
// over plain http to a non-loopback host unless AllowPlainHTTP is set.
func NewRemoteWorker(baseURL string, opts ClientOptions) (*RemoteWorker, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil, u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return nil, &OptionsError{Field: "baseURL", Reason: "must be an http or https URL with a host and no credentials, query or fragment"}
	case strings.ContainsFunc(opts.Token, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return nil, &OptionsError{Field: "ClientOptions.Token", Reason: "must not contain control characters"}
	case opts.MaxResponseBytes < 0:
		return nil, &OptionsError{Field: "ClientOptions.MaxResponseBytes", Reason: "must not be negative (zero means the default)"}
	case u.Scheme == "http" && (opts.Token != "" || opts.Authorize != nil) && !loopback.IsHost(u.Hostname()) && !opts.AllowPlainHTTP:
		return nil, &OptionsError{Field: "baseURL", Reason: "credentials would travel in clear text to a non-loopback host: use https, " +
			"or set AllowPlainHTTP explicitly"}
	}
	if opts.MaxResponseBytes == 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	client := &http.Client{}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &RemoteWorker{endpoint: strings.TrimSuffix(u.String(), "/") + Path, client: client, opts: opts}, nil
}

// Execute sends pkg to the worker and returns its result. An invalid
// package is refused with a *dispatch.PackageError before anything is sent;
// an ended ctx returns its error (not retryable); no answer is a
// *TransportError (retryable); a refusal is a *RemoteError; an answer that
// is not a result for pkg is a *ProtocolError.
func (w *RemoteWorker) Execute(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	if err := pkg.Validate(); err != nil {
		return dispatch.ExecutionResult{}, err
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // the data keeps its bytes: "<" stays "<"
	if err := enc.Encode(pkg); err != nil {
		return dispatch.ExecutionResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.endpoint, &body)
	if err != nil {
		return dispatch.ExecutionResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if w.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.opts.Token)
	}
	if w.opts.Authorize != nil {
		if err := w.opts.Authorize(req); err != nil {
			return dispatch.ExecutionResult{}, err
		}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return dispatch.ExecutionResult{}, ctx.Err()
		}
		return dispatch.ExecutionResult{}, &TransportError{ExecutionID: pkg.ExecutionID, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, w.opts.MaxResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return dispatch.ExecutionResult{}, ctx.Err()
		}
		return dispatch.ExecutionResult{}, &TransportError{ExecutionID: pkg.ExecutionID, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return dispatch.ExecutionResult{}, remoteError(pkg.ExecutionID, resp.StatusCode, raw)
	}
	return decodeResult(pkg.ExecutionID, raw, w.opts.MaxResponseBytes)
}

// remoteError reads a refusal's body; a body that is not the protocol's
// error object (a proxy's page) leaves Code empty.
func remoteError(id string, status int, raw []byte) *RemoteError {
	e := &RemoteError{StatusCode: status, ExecutionID: id, Message: http.StatusText(status)}
	var body errorBody
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Reason = body.Error.Code, body.Error.Message, body.Error.Reason
	}
	return e
}

// decodeResult reads a 200's body: one ExecutionResult for id. Unknown
// fields are tolerated, so a newer server's additive fields do not break an
// older client.
func decodeResult(id string, raw []byte, limit int64) (dispatch.ExecutionResult, error) {
	if int64(len(raw)) > limit {
		return dispatch.ExecutionResult{}, &ProtocolError{ExecutionID: id, Reason: "the answer is over MaxResponseBytes"}
	}
	var res dispatch.ExecutionResult
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&res); err != nil {
		return dispatch.ExecutionResult{}, &ProtocolError{ExecutionID: id, Reason: "the answer is not an execution result"}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return dispatch.ExecutionResult{}, &ProtocolError{ExecutionID: id, Reason: "trailing data after the result"}
	}
	switch {
	case res.ExecutionID != id:
		return dispatch.ExecutionResult{}, &ProtocolError{ExecutionID: id, Reason: "the answer is for another execution"}
	case res.Status == "":
		return dispatch.ExecutionResult{}, &ProtocolError{ExecutionID: id, Reason: "the answer has no status"}
	}
	return res, nil
}
