package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom/llm"
)

// apiError answers with the API's error body.
func apiError(status int, typ, message string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(status)
		io.WriteString(w, `{"type":"error","error":{"type":"`+typ+`","message":"`+message+`"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`)
	}
}

// streamThen opens a stream with message_start and a text delta, then
// hands over to rest.
func streamThen(rest func(w http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		w.(http.Flusher).Flush()
		rest(w)
	}
}

// TestFailureMapping covers the API's answers the conformance kit does
// not: each is sent once, and mapped onto its kind.
func TestFailureMapping(t *testing.T) {
	for _, c := range []struct {
		name   string
		handle http.HandlerFunc
		stream bool
		kind   llm.Kind
		status int
		retry  bool // RetryAfter from the header
		msg    string
	}{
		{"overloaded 529", apiError(529, "overloaded_error", "Overloaded"), false, llm.KindUnavailable, 529, true, "Overloaded"},
		{"500 api_error", apiError(500, "api_error", "Internal server error"), false, llm.KindUnavailable, 500, true, "Internal server error"},
		{"504 timeout_error", apiError(504, "timeout_error", "Request timed out"), false, llm.KindUnavailable, 504, true, "Request timed out"},
		{"502 from a proxy, not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html>bad gateway</html>")
		}, false, llm.KindUnavailable, 502, false, "Bad Gateway"},
		{"input and max_tokens exceed the context", apiError(400, "invalid_request_error",
			"input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, decrease input length or `max_tokens` and try again"),
			false, llm.KindContextOverflow, 400, false, "exceed context limit"},
		{"413 request_too_large", apiError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
			false, llm.KindInvalidRequest, 413, false, "maximum allowed"},
		{"404 not_found_error", apiError(404, "not_found_error", "model: claude-nope"), false, llm.KindInvalidRequest, 404, false, "claude-nope"},
		{"402 billing_error", apiError(402, "billing_error", "Your credit balance is too low"), false, llm.KindUnauthorized, 402, false, "credit balance"},
		{"403 permission_error", apiError(403, "permission_error", "Your API key does not have permission"), true, llm.KindUnauthorized, 403, false, "permission"},
		{"overloaded mid-stream", streamThen(func(w http.ResponseWriter) {
			io.WriteString(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		}), true, llm.KindUnavailable, 0, false, "Overloaded"},
		{"a stream that breaks off", streamThen(func(http.ResponseWriter) { panic(http.ErrAbortHandler) }),
			true, llm.KindUnavailable, 200, false, "broke off"},
		{"a stream event that is not JSON", streamThen(func(w http.ResponseWriter) {
			io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n")
		}), true, llm.KindMalformed, 200, false, "wire format"},
		{"a stream without message_start", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		}, true, llm.KindMalformed, 200, false, "message_start"},
		{"a JSON body that is not a message", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		}, false, llm.KindMalformed, 200, false, "not a Messages API message"},
		{"an HTML 200", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>hello</html>")
		}, false, llm.KindMalformed, 200, false, "wire format"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var requests atomic.Int32
			p := rawAPI(t, func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				c.handle(w, r)
			})
			var sink func(llm.Delta)
			if c.stream {
				sink = func(llm.Delta) {}
			}
			_, err := p.Complete(context.Background(), ask("hi"), sink)
			e := asError(t, err, c.kind)
			if e.Status != c.status {
				t.Errorf("Status = %d, want %d", e.Status, c.status)
			}
			if got := e.RetryAfter != 0; got != c.retry {
				t.Errorf("RetryAfter = %v, want one: %v", e.RetryAfter, c.retry)
			}
			if !strings.Contains(e.Message, c.msg) {
				t.Errorf("Message = %q, want it to say %q", e.Message, c.msg)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestRefusalCarriesTheAPIsExplanation(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":"refusal","stop_sequence":null,
"stop_details":{"type":"refusal","category":"cyber","explanation":"This looks like exploit development."},"usage":{"input_tokens":9,"output_tokens":0}}`
	p := rawAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	})
	_, err := p.Complete(context.Background(), ask("write an exploit"), nil)
	e := asError(t, err, llm.KindRefused)
	if !strings.Contains(e.Message, "cyber") || !strings.Contains(e.Message, "exploit development") {
		t.Errorf("Message = %q, want the category and the explanation", e.Message)
	}
	if f, ok := llm.FailureOf(err); !ok || f.Kind != llm.KindRefused {
		t.Errorf("FailureOf = %+v, %v: a refusal is a typed failure", f, ok)
	}
}

// TestCancelIsNotAnAPIFailure checks a call whose ctx ends, mid-stream or
// before it starts: the error matches ctx.Err() and is no *llm.Error (a
// failure of the API, which the kernel might retry).
func TestCancelIsNotAnAPIFailure(t *testing.T) {
	p := rawAPI(t, streamThen(func(http.ResponseWriter) {}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := p.Complete(ctx, ask("hi"), func(llm.Delta) { cancel() })
	expired, stop := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer stop()
	_, expiredErr := p.Complete(expired, ask("hi"), nil)
	for _, c := range []struct {
		err  error
		want error
	}{{err, context.Canceled}, {expiredErr, context.DeadlineExceeded}} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("Complete = %v, want %v", c.err, c.want)
		}
		var e *llm.Error
		if errors.As(c.err, &e) {
			t.Errorf("%v is an *llm.Error", c.err)
		}
	}
}
