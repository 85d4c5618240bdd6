package llmtest

import (
	"sync"
	"testing"

	"github.com/loom-kernel/loom/llm"
)

// Reply is one scripted answer of a fake server: a response, rendered in
// the API's wire format (streamed when the request asks to stream), or a
// failure the API would send.
type Reply struct {
	// Response is what the model answers.
	Response llm.Response
	// Fail, when set, answers with the API's own error for that kind: its
	// HTTP status and error body (KindUnavailable is a 503, KindMalformed a
	// 200 whose body is not the wire format, KindRefused a well-formed answer
	// the API marks as refused). Message is the error's text.
	Fail    llm.Kind
	Message string
	// RetryAfter is the Retry-After header sent with a failure ("7", or an
	// HTTP date).
	RetryAfter string
	// Hang streams the first text fragment of Response and then holds the
	// stream open until the client goes away.
	Hang bool
}

// Received is a request a fake server got, decoded back from the wire into
// the neutral form.
type Received struct {
	Request llm.Request
	Stream  bool
	// APIKey is the credential the request carried.
	APIKey string
}

// Server is a local fake of one provider's API on loopback, speaking its
// wire format. Every provider plugin ships one (in its test files or a
// test package) and the conformance kit drives it through this interface.
type Server interface {
	// Enqueue scripts the next replies, answered in order.
	Enqueue(replies ...Reply)
	// Requests returns every request received so far.
	Requests() []Received
}

// Script is the reply queue and request record a fake server embeds: it
// implements Server.
type Script struct {
	t        testing.TB
	mu       sync.Mutex
	replies  []Reply
	received []Received
}

// NewScript returns an empty script; a request with no reply left fails t
// (nil t, as in an Example: the request just gets no reply).
func NewScript(t testing.TB) *Script { return &Script{t: t} }

// Enqueue implements Server.
func (s *Script) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Requests implements Server.
func (s *Script) Requests() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Next records a received request and returns the reply it gets; ok is
// false (and t has failed) when none is left.
func (s *Script) Next(r Received) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, r)
	if len(s.replies) == 0 {
		if s.t == nil {
			return Reply{}, false
		}
		s.t.Errorf("llmtest: request %d to the fake server has no scripted reply (model %q)", len(s.received), r.Request.Model)
		return Reply{}, false
	}
	next := s.replies[0]
	s.replies = s.replies[1:]
	return next, true
}

// Pending is how many scripted replies are not yet served.
func (s *Script) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Chunks splits s into at most n pieces of near-equal rune counts (at least
// one piece, and two when s has two runes or more): the fragments a fake
// server streams.
func Chunks(s string, n int) []string {
	runes := []rune(s)
	if n < 2 {
		n = 2
	}
	if len(runes) < 2 {
		return []string{s}
	}
	n = min(n, len(runes))
	out := make([]string, 0, n)
	size := (len(runes) + n - 1) / n
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(i+size, len(runes))]))
	}
	return out
}
