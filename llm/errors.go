package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loom-kernel/loom"
)

// Kind classifies a provider failure. The first five are the typed failure
// channels of a model call: once its retries are spent the failure is an
// outcome the log records, a flow catches it (FailureOf), and replay serves
// it without calling the provider. The rest are untyped: a replay or a
// re-drive calls the provider again (after the key or the API is fixed).
type Kind string

// The failure kinds.
const (
	// KindRateLimited: the API said slow down (HTTP 429); Error.RetryAfter
	// carries its hint. Retried; typed once retries run out.
	KindRateLimited Kind = "rateLimited"
	// KindRefused: the model declined to answer (a refusal or a safety
	// block). Typed, never retried.
	KindRefused Kind = "refused"
	// KindInvalidRequest: the API rejected the request (HTTP 400, 404,
	// 422). Typed, never retried.
	KindInvalidRequest Kind = "invalidRequest"
	// KindContextOverflow: the prompt does not fit the model's context
	// window. Typed, never retried: compact the transcript and call again.
	KindContextOverflow Kind = "contextOverflow"
	// KindUnavailable: the API failed or could not be reached (HTTP 5xx,
	// overloaded, a broken connection). Retried; typed once retries run out
	// (a fallback moves on to the next model).
	KindUnavailable Kind = "unavailable"
	// KindMalformed: the API answered with a body that is not its wire
	// format. Retried; untyped.
	KindMalformed Kind = "malformed"
	// KindUnauthorized: the API key was refused (HTTP 401, 403). Untyped
	// and never retried: fix the key.
	KindUnauthorized Kind = "unauthorized"
)

// typedKinds are the kinds recorded as typed failures, in channel order.
var typedKinds = []Kind{KindRateLimited, KindRefused, KindInvalidRequest, KindContextOverflow, KindUnavailable}

// Typed reports whether failures of kind k are typed failure channels.
func (k Kind) Typed() bool {
	for _, t := range typedKinds {
		if k == t {
			return true
		}
	}
	return false
}

// Retryable reports whether another attempt may succeed.
func (k Kind) Retryable() bool {
	return k == KindRateLimited || k == KindUnavailable || k == KindMalformed
}

// MaxErrorMessageBytes bounds Error.Message (it is recorded).
const MaxErrorMessageBytes = 1024

// Error is a provider failure. Providers build it with NewError, which
// bounds the message; they never put the API key, a request body or a
// response body beyond the API's own error message into it.
type Error struct {
	Provider string
	Kind     Kind
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// RetryAfter is the API's hint (Retry-After), 0 without one.
	RetryAfter time.Duration
	Message    string
	// Err is the cause (the SDK's error, a context error), for errors.Is.
	Err error
}

// NewError builds an *Error with a bounded message. A retry-after hint is
// capped at five minutes.
func NewError(provider string, kind Kind, status int, message string, cause error) *Error {
	return &Error{Provider: provider, Kind: kind, Status: status, Message: boundText(message, MaxErrorMessageBytes), Err: cause}
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llm: %s: %s", e.Provider, e.Kind)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfter > 0 {
		b.WriteString("; retry after " + e.RetryAfter.String())
	}
	return b.String()
}

// Unwrap returns the cause and, for a typed kind, the *loom.TypedFailure
// the kernel records: so the step fails on the kind's channel.
func (e *Error) Unwrap() []error {
	errs := []error{}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Kind.Typed() {
		errs = append(errs, e.typed())
	}
	return errs
}

// RetryDelay is the API's retry-after hint, for the retry ring.
func (e *Error) RetryDelay() time.Duration { return min(e.RetryAfter, retryAfterCap) }

// Failure is the payload of a typed model-call failure, as recorded on the
// kind's channel and served on replay.
type Failure struct {
	Provider     string `json:"provider"`
	Kind         Kind   `json:"kind"`
	Status       int    `json:"status,omitempty"`
	Message      string `json:"message,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
}

func (e *Error) typed() *loom.TypedFailure {
	raw, _ := json.Marshal(Failure{Provider: e.Provider, Kind: e.Kind, Status: e.Status, Message: e.Message,
		RetryAfterMs: e.RetryAfter.Milliseconds()})
	return &loom.TypedFailure{Channel: string(e.Kind), Payload: raw}
}

// failureSchema is every typed channel's payload schema.
const failureSchema = `{"type":"object","required":["provider","kind"],"properties":{
"provider":{"type":"string"},"kind":{"type":"string"},"status":{"type":"integer"},
"message":{"type":"string"},"retryAfterMs":{"type":"integer"}}}`

// FailureOf returns the typed model-call failure err carries — live an
// *Error of a typed kind, on replay the recorded *loom.TypedFailure — and
// whether there is one.
func FailureOf(err error) (Failure, bool) {
	var e *Error
	if errors.As(err, &e) && e.Kind.Typed() {
		return Failure{Provider: e.Provider, Kind: e.Kind, Status: e.Status, Message: e.Message,
			RetryAfterMs: e.RetryAfter.Milliseconds()}, true
	}
	var tf *loom.TypedFailure
	if !errors.As(err, &tf) || !Kind(tf.Channel).Typed() {
		return Failure{}, false
	}
	var f Failure
	if json.Unmarshal(tf.Payload, &f) != nil || f.Kind != Kind(tf.Channel) {
		return Failure{}, false
	}
	return f, true
}

// ParseRetryAfter reads a Retry-After header value: seconds, or an HTTP
// date relative to now. Anything else is 0.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return min(time.Duration(s*float64(time.Second)), retryAfterCap)
	}
	if t, err := time.Parse(time.RFC1123, v); err == nil && t.After(now) {
		return min(t.Sub(now), retryAfterCap)
	}
	return 0
}

// boundText cuts s to at most n bytes on a rune boundary.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
