package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/loom-kernel/loom/fold"
)

// MaxResponseBytes caps a response the Client reads (an events page of
// large payloads is the biggest): a bigger one fails the call.
const MaxResponseBytes = 64 << 20

// Client calls a wire ABI server: one method per RPC, typed params and
// results, and errors as *Error (which match the kernel's sentinels with
// errors.Is). It is safe for concurrent use.
type Client struct {
	endpoint string
	token    string
	hc       *http.Client
	nextID   atomic.Int64
}

// ClientOption configures NewClient.
type ClientOption func(*Client)

// WithToken sends "Authorization: Bearer <token>" on every request.
func WithToken(token string) ClientOption { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc instead of a default http.Client (whose calls are
// bounded only by their context).
func WithHTTPClient(hc *http.Client) ClientOption { return func(c *Client) { c.hc = hc } }

// NewClient returns a client of the server at addr: "host:port" (plain
// HTTP, path Path), or a URL ("http://host:port", path Path when it has
// none; "https://…/custom/rpc"). It refuses an address it cannot parse and
// sends nothing until the first call.
func NewClient(addr string, opts ...ClientOption) (*Client, error) {
	if addr == "" {
		return nil, errors.New("wire: no server address: give host:port or a URL")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("wire: %q is not host:port or an http(s) URL", addr)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = Path
	}
	c := &Client{endpoint: u.String(), hc: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Endpoint returns the URL the client posts to.
func (c *Client) Endpoint() string { return c.endpoint }

// Handshake calls loom.handshake.
func (c *Client) Handshake(ctx context.Context) (Handshake, error) {
	var h Handshake
	return h, c.Call(ctx, MethodHandshake, nil, &h)
}

// Start calls execution.start.
func (c *Client) Start(ctx context.Context, p StartParams) (StartResult, error) {
	var r StartResult
	return r, c.Call(ctx, MethodStart, p, &r)
}

// Resume calls execution.resume: the event passes the runtime's ingress
// gate; a refusal is an *Error with a refusal code and appended nothing.
func (c *Client) Resume(ctx context.Context, p ResumeParams) (ResumeResult, error) {
	var r ResumeResult
	return r, c.Call(ctx, MethodResume, p, &r)
}

// Cancel calls execution.cancel.
func (c *Client) Cancel(ctx context.Context, p CancelParams) (CancelResult, error) {
	var r CancelResult
	return r, c.Call(ctx, MethodCancel, p, &r)
}

// Send calls execution.send (1.4.0).
func (c *Client) Send(ctx context.Context, p SendParams) (SendResult, error) {
	var r SendResult
	return r, c.Call(ctx, MethodSend, p, &r)
}

// ResumeAs calls execution.resumeAs (1.4.0).
func (c *Client) ResumeAs(ctx context.Context, p ResumeAsParams) (ResumeAsResult, error) {
	var r ResumeAsResult
	return r, c.Call(ctx, MethodResumeAs, p, &r)
}

// Recover calls runtime.recover (1.4.0).
func (c *Client) Recover(ctx context.Context) (RecoverResult, error) {
	var r RecoverResult
	return r, c.Call(ctx, MethodRecover, struct{}{}, &r)
}

// List calls execution.list (1.5.0): one page of the app's executions.
// Page on with p.After set to the result's Next until it is "": a page
// may be short, or empty, before the last.
func (c *Client) List(ctx context.Context, p ListParams) (ListResult, error) {
	var r ListResult
	return r, c.Call(ctx, MethodList, p, &r)
}

// CheckReplay calls execution.checkReplay (1.6.0): does the execution's
// stored log replay under the code the app runs now?
func (c *Client) CheckReplay(ctx context.Context, p CheckReplayParams) (CheckReplayResult, error) {
	var r CheckReplayResult
	return r, c.Call(ctx, MethodCheck, p, &r)
}

// Fork calls execution.fork.
func (c *Client) Fork(ctx context.Context, p ForkParams) (ForkResult, error) {
	var r ForkResult
	return r, c.Call(ctx, MethodFork, p, &r)
}

// State calls execution.state.
func (c *Client) State(ctx context.Context, p StateParams) (StateResult, error) {
	var r StateResult
	return r, c.Call(ctx, MethodState, p, &r)
}

// Decode parses the canonical state of a StateResult.
func (r StateResult) Decode() (fold.State, error) { return fold.Decode(r.State) }

// Events calls execution.events: one page of the log.
func (c *Client) Events(ctx context.Context, p EventsParams) (EventsResult, error) {
	var r EventsResult
	return r, c.Call(ctx, MethodEvents, p, &r)
}

// Resolve calls execution.resolve: an operator's verdict on an in-doubt
// park. A verdict for another step or attempt than the parked one is
// refused (CodePayloadInvalid) and records nothing.
func (c *Client) Resolve(ctx context.Context, p ResolveParams) (ResolveResult, error) {
	var r ResolveResult
	return r, c.Call(ctx, MethodResolve, p, &r)
}

// Gate calls execution.gate: what an execution is parked on, its timeout,
// and the JSON Schema of the answer.
func (c *Client) Gate(ctx context.Context, p GateParams) (GateResult, error) {
	var r GateResult
	return r, c.Call(ctx, MethodGate, p, &r)
}

// Call sends one JSON-RPC request and decodes its result into result (which
// may be nil). A JSON-RPC error comes back as *Error; a transport failure or
// an answer that is not JSON-RPC as another error naming the endpoint.
// Params holding text that is not valid UTF-8 are refused before anything
// is sent, with an error matching ErrInvalidUTF8 (every method does so).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.decodeResponse(resp, result)
}

func (c *Client) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	return c.postWith(ctx, method, params, accept, nil)
}

// postWith is post with extra request headers.
func (c *Client) postWith(ctx context.Context, method string, params any, accept string, header map[string]string) (*http.Response, error) {
	req := map[string]any{"jsonrpc": "2.0", "id": c.nextID.Add(1), "method": method}
	if params != nil {
		req["params"] = params
	}
	body, err := encodeRequest(req)
	if err != nil {
		return nil, fmt.Errorf("wire: encoding %s params: %w", method, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header { //loom:order-independent header set
		hr.Header.Set(k, v)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("wire: calling %s at %s: %w", method, c.endpoint, err)
	}
	return resp, nil
}

// ErrInvalidUTF8 matches a call the Client refused before sending anything:
// a string in its params (an id, an event type, a reason) is not valid
// UTF-8, or a JSON value in them (an input, a payload, credentials) holds
// invalid UTF-8 or a lone surrogate escape such as "\udc00". The server
// refuses such params (CodeInvalidParams); encoding/json would instead send
// them rewritten to U+FFFD, under another id.
var ErrInvalidUTF8 = errors.New("wire: not valid UTF-8")

// encodeRequest encodes a request as encoding/json does (the same names,
// omitempty, map order, no HTML escaping) except that it refuses, with
// ErrInvalidUTF8, text that is not valid UTF-8 instead of rewriting it.
func encodeRequest(req any) ([]byte, error) {
	strict := []jsonv2.Options{jsonv1.DefaultOptionsV1(), jsonv2.Deterministic(true), jsontext.EscapeForHTML(false)}
	body, err := jsonv2.Marshal(req, append(strict, jsontext.AllowInvalidUTF8(false))...)
	if err == nil {
		return body, nil
	}
	// Tell a text problem from another (a RawMessage that is not JSON) by
	// whether the lenient encoding succeeds.
	if _, lerr := jsonv2.Marshal(req, append(strict, jsontext.AllowInvalidUTF8(true))...); lerr == nil {
		return nil, fmt.Errorf("%w (invalid bytes, or a lone surrogate escape such as \\udc00); nothing was sent", ErrInvalidUTF8)
	}
	return nil, err
}

func (c *Client) decodeResponse(resp *http.Response, result any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("wire: reading the answer of %s: %w", c.endpoint, err)
	}
	if len(b) > MaxResponseBytes {
		return fmt.Errorf("wire: the answer of %s is over %d bytes", c.endpoint, MaxResponseBytes)
	}
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *Error          `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.JSONRPC != "2.0" {
		return fmt.Errorf("wire: %s answered HTTP %d without a JSON-RPC 2.0 response: is it a Loom wire endpoint?", c.endpoint, resp.StatusCode)
	}
	if r.Error != nil {
		return r.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("wire: decoding the result from %s: %w", c.endpoint, err)
	}
	return nil
}
