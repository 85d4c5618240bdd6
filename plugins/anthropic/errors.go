package anthropic

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/shared"

	"github.com/loom-kernel/loom/llm"
)

// contextOverflowPhrases are how the API's invalid_request_error says the
// prompt does not fit the context window (it has no error code for it):
// "prompt is too long: 208310 tokens > 200000 maximum", and "input length
// and `max_tokens` exceed context limit: …" when the answer's budget is
// what no longer fits.
var contextOverflowPhrases = []string{"prompt is too long", "exceed context limit"}

// failure turns what the SDK returned for a failed call into the error
// Complete returns; res is the HTTP response, nil when none came.
//
//   - ctx ended: ctx.Err(), wrapped;
//   - the API's error body (an HTTP error status, or an error event in a
//     stream): its kind, status and message (apiFailure);
//   - an error status whose body is not the API's: its kind by status;
//   - an answer that broke off (a read error): KindUnavailable;
//   - an answer that arrived but is not the wire format: KindMalformed;
//   - no answer (a connection or timeout error): KindUnavailable.
//
// The SDK's *sdk.Error is never the cause of the returned error: it holds
// the request, whose headers carry the key.
func (p *Provider) failure(ctx context.Context, err error, res *http.Response) error {
	if ctx.Err() != nil {
		return p.cancelled(ctx)
	}
	var api *sdk.Error
	switch {
	case errors.As(err, &api):
		return p.apiFailure(api)
	case res != nil && res.StatusCode >= 400:
		return p.withRetryAfter(llm.NewError(p.name, kindOf(res.StatusCode, "", ""), res.StatusCode,
			http.StatusText(res.StatusCode), nil), res.Header)
	case res != nil && !brokenOff(err):
		return llm.NewError(p.name, llm.KindMalformed, res.StatusCode, "the answer is not the Messages API's wire format", err)
	case res != nil:
		return llm.NewError(p.name, llm.KindUnavailable, res.StatusCode, "the answer broke off: "+err.Error(), err)
	}
	return llm.NewError(p.name, llm.KindUnavailable, 0, "no answer: "+err.Error(), err)
}

// brokenOff reports whether err is a transport failure while reading an
// answer, as opposed to an answer that was read and did not decode.
func brokenOff(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// apiFailure is the error of the API's own error body. An error event in
// a stream comes after a 200: it has no HTTP status of its own, so its
// kind is its type's and its Status 0.
func (p *Provider) apiFailure(api *sdk.Error) error {
	status := api.StatusCode
	if status < 400 {
		status = 0
	}
	msg := api.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := llm.NewError(p.name, kindOf(status, api.Type(), msg), status, msg, nil)
	if api.Response != nil && status != 0 {
		return p.withRetryAfter(e, api.Response.Header)
	}
	return e
}

// withRetryAfter sets the error's RetryAfter from the header's hint (429s
// carry one, and a 529 may), for a kind that another attempt may cure.
func (p *Provider) withRetryAfter(e *llm.Error, h http.Header) *llm.Error {
	if e.Kind.Retryable() {
		e.RetryAfter = llm.ParseRetryAfter(h.Get("Retry-After"), p.now())
	}
	return e
}

// kindOf classifies an API error by its HTTP status (0 for an error event
// in a stream), its error type and its message:
//
//	429, rate_limit_error                                  KindRateLimited
//	401, 402, 403, authentication/billing/permission_error KindUnauthorized
//	408, 5xx (529 overloaded), api/overloaded/timeout_error KindUnavailable
//	a 4xx saying the prompt does not fit                   KindContextOverflow
//	any other 4xx (400, 404, 413, 422), invalid_request… KindInvalidRequest
func kindOf(status int, typ shared.ErrorType, msg string) llm.Kind {
	switch {
	case status == http.StatusTooManyRequests || typ == shared.ErrorTypeRateLimitError:
		return llm.KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusPaymentRequired || status == http.StatusForbidden,
		typ == shared.ErrorTypeAuthenticationError || typ == shared.ErrorTypeBillingError || typ == shared.ErrorTypePermissionError:
		return llm.KindUnauthorized
	case status == http.StatusRequestTimeout || status >= 500,
		typ == shared.ErrorTypeAPIError || typ == shared.ErrorTypeOverloadedError || typ == shared.ErrorTypeTimeoutError:
		return llm.KindUnavailable
	case status == 0 && typ == "":
		// An error event of no known type: the stream failed.
		return llm.KindUnavailable
	case contextOverflow(msg):
		return llm.KindContextOverflow
	}
	return llm.KindInvalidRequest
}

func contextOverflow(msg string) bool {
	msg = strings.ToLower(msg)
	for _, phrase := range contextOverflowPhrases {
		if strings.Contains(msg, phrase) {
			return true
		}
	}
	return false
}
