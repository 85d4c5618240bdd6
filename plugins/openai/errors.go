package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/loom-kernel/loom/llm"
)

// The API's error codes (error.code) that decide a kind on their own.
const (
	codeContextLength = "context_length_exceeded"
	// codeContentFilter is how Azure OpenAI refuses a prompt.
	codeContentFilter = "content_filter"
	codeContentPolicy = "content_policy_violation"
)

// retryAfterBound caps a retry-after-ms hint as llm.ParseRetryAfter caps
// Retry-After.
const retryAfterBound = 5 * time.Minute

// redacted replaces the API key wherever an error message would carry it
// (the API echoes a masked key on a 401; a proxy might echo it whole).
const redacted = "[redacted]"

// newError is an *llm.Error whose message cannot carry the key.
func (p *Provider) newError(kind llm.Kind, status int, message string, cause error, key string) *llm.Error {
	if key != "" {
		message = strings.ReplaceAll(message, key, redacted)
	}
	return llm.NewError(p.name, kind, status, message, cause)
}

// failure classifies a failed call. resp is the HTTP response, nil when
// none came. A done ctx wins over whatever the transport made of it.
func (p *Provider) failure(ctx context.Context, err error, resp *http.Response, key string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.newError(llm.KindUnavailable, 0, "the call ended with its context: "+ctxErr.Error(), ctxErr, key)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) || (resp != nil && resp.StatusCode >= 400) {
		return p.statusFailure(err, apiErr, resp, key)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		// An error event inside a 200 stream: the API's error object, no status.
		m, code, typ := errorObject(streamErr.Event.Data)
		return p.newError(kindOf(0, code, typ, m), 0, messageOr(m, 0), nil, key)
	}
	if resp == nil {
		return p.newError(llm.KindUnavailable, 0, "the API could not be reached: "+err.Error(), err, key)
	}
	if transportBroke(err) {
		return p.newError(llm.KindUnavailable, resp.StatusCode, "the connection broke mid-answer: "+err.Error(), err, key)
	}
	return p.newError(llm.KindMalformed, resp.StatusCode, "the answer is not the chat completions format: "+err.Error(), err, key)
}

// statusFailure classifies an error status. The SDK reads the body's
// {"error":{...}}; when that is not there (a compatible server's top-level
// error object, a proxy's page) the body it left in resp is read instead.
func (p *Provider) statusFailure(err error, apiErr *sdk.Error, resp *http.Response, key string) error {
	var status int
	var message, code, typ string
	cause := err
	if apiErr != nil {
		status, message, code, typ = apiErr.StatusCode, apiErr.Message, apiErr.Code, apiErr.Type
		cause = withoutRequest(apiErr)
	}
	if resp != nil {
		status = resp.StatusCode
		if message == "" && code == "" {
			message, code, typ = errorObject(bodyPrefix(resp))
		}
	}
	e := p.newError(kindOf(status, code, typ, message), status, messageOr(message, status), cause, key)
	e.RetryAfter = retryAfter(resp)
	return e
}

// maxErrorBodyBytes bounds how much of an error body is read for its
// message.
const maxErrorBodyBytes = 64 << 10

// bodyPrefix is the start of an error response's body. The SDK leaves the
// body it read in place for this; nil when it is gone.
func bodyPrefix(resp *http.Response) []byte {
	if resp.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes)) // a short read is still a prefix
	return b
}

// errorObject reads an error body, {"error":{...}} or (vLLM and others) a
// top-level {"message","type","code"}; empty when it is neither.
func errorObject(body []byte) (message, code, typ string) {
	type object struct {
		Message string          `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	var b struct {
		Error *object `json:"error"`
		object
	}
	if json.Unmarshal(body, &b) != nil {
		return "", "", ""
	}
	o := b.object
	if b.Error != nil {
		o = *b.Error
	}
	return o.Message, jsonString(o.Code), jsonString(o.Type)
}

// kindOf maps the API's status and error object onto a kind. status is 0
// for an error event inside a stream, which only its type classifies.
func kindOf(status int, code, typ, message string) llm.Kind {
	switch {
	case code == codeContextLength:
		return llm.KindContextOverflow
	case code == codeContentFilter || code == codeContentPolicy:
		return llm.KindRefused
	case status == http.StatusTooManyRequests:
		return llm.KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.KindUnauthorized
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return llm.KindUnavailable
	case strings.Contains(strings.ToLower(message), "maximum context length"):
		// Compatible servers (vLLM) say an overflow with no code.
		return llm.KindContextOverflow
	case status >= 400 || typ == "invalid_request_error":
		return llm.KindInvalidRequest
	}
	return llm.KindUnavailable
}

func messageOr(message string, status int) string {
	if message != "" {
		return message
	}
	if status != 0 {
		return http.StatusText(status)
	}
	return "the API reported an error"
}

// withoutRequest is the SDK's error without the request and response it
// keeps for debugging: the request's headers carry the API key, and an
// *llm.Error is logged and recorded.
func withoutRequest(e *sdk.Error) *sdk.Error {
	c := *e
	c.Request, c.Response = nil, nil
	return &c
}

// retryAfter reads the API's hint: retry-after-ms (OpenAI's, finer) or
// Retry-After (seconds or an HTTP date).
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(strings.TrimSpace(resp.Header.Get("Retry-After-Ms")), 64); err == nil && ms >= 0 {
		if ms >= float64(retryAfterBound/time.Millisecond) { // also +Inf, which no Duration holds
			return retryAfterBound
		}
		return time.Duration(ms * float64(time.Millisecond))
	}
	return llm.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
}

// transportBroke reports whether reading an answer failed in the
// connection rather than in its content.
func transportBroke(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}

// jsonString is a JSON string's value, "" for anything else (codes are
// strings on OpenAI, numbers or null on some compatible servers).
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
