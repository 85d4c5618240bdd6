package gemini

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"github.com/loom-kernel/loom/llm"
)

// observation is what the transport saw of a call's one HTTP exchange: the
// SDK's errors carry neither the response headers (Retry-After) nor whether
// a failure was the network's or the body's, so the provider watches the
// wire itself. It never records a request or a body.
type observation struct {
	mu         sync.Mutex
	sent       int
	status     int
	retryAfter string
	readErr    error
}

func (o *observation) snapshot() (sent, status int, retryAfter string, readErr error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sent, o.status, o.retryAfter, o.readErr
}

// observationKey is the context key of a call's *observation.
type observationKey struct{}

// observingTransport records, for a request whose context holds an
// observation, the response's status and Retry-After header and any error
// reading its body. It changes nothing on the wire.
type observingTransport struct{ base http.RoundTripper }

func (t observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	obs, _ := req.Context().Value(observationKey{}).(*observation)
	if obs == nil {
		return t.base.RoundTrip(req)
	}
	obs.mu.Lock()
	obs.sent++
	obs.mu.Unlock()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	obs.mu.Lock()
	obs.status, obs.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	obs.mu.Unlock()
	resp.Body = &observedBody{ReadCloser: resp.Body, obs: obs}
	return resp, nil
}

// observedBody records the first error other than io.EOF that reading the
// body returns: a connection that broke mid-answer.
type observedBody struct {
	io.ReadCloser
	obs *observation
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.obs.mu.Lock()
		if b.obs.readErr == nil {
			b.obs.readErr = err
		}
		b.obs.mu.Unlock()
	}
	return n, err
}

// failure classifies an error of the SDK's call into an *llm.Error. The
// SDK's own text is never the message: outside its API errors it can quote
// a request or response body.
func (p *Provider) failure(ctx context.Context, err error, obs *observation) error {
	if ctx.Err() != nil {
		return cancelled(p.name, ctx)
	}
	sent, status, retryAfter, readErr := obs.snapshot()
	var apiErr genai.APIError
	switch {
	case errors.As(err, &apiErr):
		if status < 300 && apiErr.Code != 0 {
			status = apiErr.Code // an error event inside a 200 stream
		}
		e := llm.NewError(p.name, apiKind(status, apiErr), status, apiMessage(status, apiErr), apiErr)
		if e.Kind == llm.KindRateLimited {
			e.RetryAfter = p.retryDelay(retryAfter, apiErr)
		}
		return e
	case sent == 0:
		return llm.NewError(p.name, llm.KindInvalidRequest, 0, "the Gemini SDK refused to send the request", nil)
	case status == 0:
		return llm.NewError(p.name, llm.KindUnavailable, 0, "the Gemini API could not be reached", err)
	case readErr != nil:
		return llm.NewError(p.name, llm.KindUnavailable, status, "the connection broke during the answer", readErr)
	}
	return llm.NewError(p.name, llm.KindMalformed, status, "the answer is not in the Gemini wire format", nil)
}

// cancelled is the error of a call whose ctx is done: it wraps ctx.Err().
func cancelled(provider string, ctx context.Context) error {
	return llm.NewError(provider, llm.KindUnavailable, 0, "the call was cancelled: "+ctx.Err().Error(), ctx.Err())
}

// apiKind maps an API error. Gemini answers a bad key with 400
// INVALID_ARGUMENT and reason API_KEY_INVALID, so that is unauthorized too;
// a prompt over the model's input limit is a 400 whose message says the
// input token count exceeds the maximum.
func apiKind(status int, e genai.APIError) llm.Kind {
	switch {
	case status == http.StatusTooManyRequests || e.Status == "RESOURCE_EXHAUSTED":
		return llm.KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		e.Status == "UNAUTHENTICATED" || e.Status == "PERMISSION_DENIED" || badKey(e):
		return llm.KindUnauthorized
	case status == http.StatusRequestTimeout || status >= 500 || status == 499:
		return llm.KindUnavailable
	case contextOverflow(e.Message):
		return llm.KindContextOverflow
	case status >= 400:
		return llm.KindInvalidRequest
	}
	return llm.KindMalformed
}

// badKey reports an API error that names the key as invalid.
func badKey(e genai.APIError) bool {
	for _, d := range e.Details {
		if reason, _ := d["reason"].(string); reason == "API_KEY_INVALID" {
			return true
		}
	}
	return strings.Contains(e.Message, "API key not valid")
}

// contextOverflow reports Gemini's messages for a prompt that does not fit:
// "The input token count (N) exceeds the maximum number of tokens allowed
// (M)." and a request payload over the size limit.
func contextOverflow(msg string) bool {
	m := strings.ToLower(msg)
	return (strings.Contains(m, "input token count") && strings.Contains(m, "exceeds the maximum")) ||
		strings.Contains(m, "request payload size exceeds the limit")
}

// apiMessage is the API's own error text, or the status text without one.
func apiMessage(status int, e genai.APIError) string {
	if e.Message != "" {
		return e.Message
	}
	if e.Status != "" {
		return e.Status
	}
	return http.StatusText(status)
}

// retryDelay is the API's hint: the Retry-After header (seconds or an HTTP
// date), else the retryDelay of a google.rpc.RetryInfo error detail
// ("7s"), which is how Gemini usually says it. Both are capped like
// llm.ParseRetryAfter caps.
func (p *Provider) retryDelay(header string, e genai.APIError) time.Duration {
	if d := llm.ParseRetryAfter(header, p.now()); d > 0 {
		return d
	}
	for _, detail := range e.Details {
		typ, _ := detail["@type"].(string)
		delay, _ := detail["retryDelay"].(string)
		if !strings.HasSuffix(typ, "google.rpc.RetryInfo") || delay == "" {
			continue
		}
		if d, err := time.ParseDuration(delay); err == nil && d > 0 {
			return llm.ParseRetryAfter(strconv.FormatFloat(d.Seconds(), 'f', -1, 64), p.now())
		}
	}
	return 0
}
