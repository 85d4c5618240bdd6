package anthropictest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic"
)

// maxBodyBytes bounds a request body the fake reads.
const maxBodyBytes = 8 << 20

// malformedBody is what a broken proxy answers with a 200: not the wire
// format.
const malformedBody = "<html><body><h1>502 Bad Gateway</h1></body></html>\n"

// Server is a local fake of the Anthropic Messages API on loopback. It
// serves POST /v1/messages only (any other method or path fails the test
// and gets a 404), requires the anthropic-version header, decodes every
// request strictly into an llm.Request (the key from x-api-key, or from
// Authorization: Bearer as the SDK sends it) and records it, then answers
// with the next scripted llmtest.Reply in the API's wire format: a message
// as JSON, or as server-sent events when the request streams (message_start,
// ping, content_block_start/delta/stop per block with the text in pieces
// and the tool arguments in input_json_delta pieces, message_delta,
// message_stop). The failure kinds are the API's answers:
//
//	KindRateLimited      429 rate_limit_error, with Reply.RetryAfter as Retry-After
//	KindUnavailable      503 api_error
//	KindMalformed        200 whose body is an HTML page
//	KindInvalidRequest   400 invalid_request_error
//	KindContextOverflow  400 invalid_request_error "prompt is too long: …"
//	KindUnauthorized     401 authentication_error
//	KindRefused          200 message with stop_reason "refusal" and stop_details
//
// each error body being {"type":"error","error":{"type":…,"message":…}}.
// Hang streams the first text piece and then holds the stream open until
// the client goes away.
type Server struct {
	*llmtest.Script
	t   testing.TB
	srv *httptest.Server
	ids atomic.Int64
}

// NewServer starts a fake on loopback, closed when t's test ends. A
// request the real API would refuse as malformed, or one with no reply
// scripted, fails t.
func NewServer(t testing.TB) *Server {
	s := start(t)
	t.Cleanup(s.srv.Close)
	return s
}

// Start starts a fake outside a test (an Example, a demo): what would fail
// a test is collected and returned by Close, which the caller must call.
func Start() *Server { return start(&detached{}) }

func start(t testing.TB) *Server {
	s := &Server{Script: llmtest.NewScript(t), t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the fake's base URL, for anthropic.Options.BaseURL.
func (s *Server) URL() string { return s.srv.URL }

// Provider is a provider aimed at the fake, with Credential{Key: apiKey}.
func (s *Server) Provider(t testing.TB, apiKey string) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Options{Credential: llm.Credential{Key: apiKey}, BaseURL: s.URL(), HTTPClient: s.srv.Client()})
	if err != nil {
		t.Fatalf("anthropic.New: %v", err)
	}
	return p
}

// Close stops the fake (waiting for the requests in flight) and, for one
// from Start, returns what went wrong while it ran. Closing twice is
// harmless.
func (s *Server) Close() error {
	s.srv.Close()
	if d, ok := s.t.(*detached); ok {
		return d.err()
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	id := s.ids.Add(1)
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%d", id))
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.t.Errorf("anthropictest: %s %s: the Messages API is POST /v1/messages", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	}
	req, stream, err := s.decode(r)
	if err != nil {
		s.t.Errorf("anthropictest: the API would refuse this request: %v", err)
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	reply, ok := s.Next(llmtest.Received{Request: req, Stream: stream, APIKey: apiKey(r.Header)})
	if !ok {
		writeError(w, http.StatusInternalServerError, "api_error", "anthropictest: no scripted reply")
		return
	}
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	msg := renderMessage(fmt.Sprintf("msg_fake_%d", id), reply.Response)
	switch reply.Fail {
	case "":
	case llm.KindRefused:
		msg = refused(msg, or(reply.Message, "This request was declined under the usage policy."))
	case llm.KindMalformed:
		w.Header().Set("Content-Type", contentType(stream))
		io.WriteString(w, malformedBody)
		return
	default:
		status, typ, message := failure(reply)
		if status == 0 {
			s.t.Errorf("anthropictest: no Messages API answer for failure kind %q", reply.Fail)
			status = http.StatusInternalServerError
		}
		writeError(w, status, typ, message)
		return
	}
	w.Header().Set("Content-Type", contentType(stream))
	if !stream {
		json.NewEncoder(w).Encode(msg)
		return
	}
	writeStream(r.Context(), events{w: w, f: w.(http.Flusher)}, msg, reply.Hang)
}

// decode checks the headers the API requires and decodes the body.
func (s *Server) decode(r *http.Request) (llm.Request, bool, error) {
	if r.Header.Get("anthropic-version") == "" {
		return llm.Request{}, false, errors.New("anthropic-version: header is required")
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return llm.Request{}, false, fmt.Errorf("content-type %q: want application/json", ct)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return llm.Request{}, false, fmt.Errorf("reading the body: %w", err)
	}
	return decodeRequest(body)
}

// apiKey is the key a request carried: x-api-key, else a bearer token.
func apiKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// failure is the HTTP status, error type and message the API answers a
// failure kind with; status 0 for a kind it has none for.
func failure(r llmtest.Reply) (int, string, string) {
	switch r.Fail {
	case llm.KindRateLimited:
		return http.StatusTooManyRequests, "rate_limit_error", or(r.Message, "Number of request tokens has exceeded your per-minute rate limit")
	case llm.KindUnavailable:
		return http.StatusServiceUnavailable, "api_error", or(r.Message, "Service unavailable")
	case llm.KindInvalidRequest:
		return http.StatusBadRequest, "invalid_request_error", or(r.Message, "messages: field required")
	case llm.KindContextOverflow:
		return http.StatusBadRequest, "invalid_request_error", or(r.Message, "prompt is too long: 250000 tokens > 200000 maximum")
	case llm.KindUnauthorized:
		return http.StatusUnauthorized, "authentication_error", or(r.Message, "invalid x-api-key")
	}
	return 0, "api_error", string(r.Fail)
}

// writeError answers with the API's error body.
func writeError(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": message},
		"request_id": w.Header().Get("request-id"),
	})
}

func contentType(stream bool) string {
	if stream {
		return "text/event-stream; charset=utf-8"
	}
	return "application/json"
}

func or(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

// detached stands in for a testing.TB outside a test. Only Helper and
// Errorf are called on it (by the fake and its llmtest.Script); the
// embedded TB is nil, so anything else would panic.
type detached struct {
	testing.TB
	mu       sync.Mutex
	failures []error
}

func (d *detached) Helper() {}

func (d *detached) Errorf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures = append(d.failures, fmt.Errorf(format, args...))
}

func (d *detached) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.failures...)
}
