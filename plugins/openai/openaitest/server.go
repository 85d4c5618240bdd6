package openaitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/openai"
)

// Path is the one endpoint the fake serves, under URL: the SDK's
// chat/completions joined to the /v1 base, as on api.openai.com.
const Path = "/v1/chat/completions"

// maxRequestBytes bounds a request body the fake reads.
const maxRequestBytes = 8 << 20

// Server is a fake of the Chat Completions API on loopback. It embeds the
// reply script (so it is an llmtest.Server): each POST to Path is decoded
// back into an llm.Request, recorded, and answered with the next scripted
// reply in the API's wire format — a chat.completion JSON body, or for a
// streamed request chat.completion.chunk server-sent events ending in a
// usage chunk and [DONE]. Any other method or path fails the test with a
// 404, as does a body the fake cannot decode (with a 400).
type Server struct {
	*llmtest.Script
	t    testing.TB
	http *httptest.Server
	// done ends every hanging answer when the test ends, so Close does not
	// wait on a client that never went away.
	done chan struct{}
	ids  atomic.Int64 // completion ids: chatcmpl-fake-1, -2…
}

// NewServer starts a fake on loopback, closed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{Script: llmtest.NewScript(t), t: t, done: make(chan struct{})}
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.http.Close()
	})
	return s
}

// URL is the base URL to aim a provider at (it ends in /v1).
func (s *Server) URL() string { return s.http.URL + "/v1" }

// Provider is a provider aimed at the fake with Credential{Key: apiKey}.
func (s *Server) Provider(t testing.TB, apiKey string) *openai.Provider {
	t.Helper()
	p, err := openai.New(openai.Options{Credential: llm.Credential{Key: apiKey}, BaseURL: s.URL(), HTTPClient: s.http.Client()})
	if err != nil {
		t.Fatalf("openai.New: %v", err)
	}
	return p
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != Path {
		s.t.Errorf("openaitest: %s %s, want POST %s", r.Method, r.URL.Path, Path)
		writeError(w, http.StatusNotFound, apiError{Message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")", Type: "invalid_request_error"})
		return
	}
	received, err := decodeRequest(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		s.t.Errorf("openaitest: the request body is not a chat completions request: %v", err)
		writeError(w, http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error"})
		return
	}
	received.APIKey = bearer(r.Header.Get("Authorization"))
	reply, ok := s.Next(received)
	if !ok {
		writeError(w, http.StatusInternalServerError, apiError{Message: "the fake has no scripted reply", Type: "server_error"})
		return
	}
	if reply.Fail != "" {
		s.fail(w, reply, received.Stream)
		return
	}
	id := s.nextID()
	switch {
	case received.Stream:
		s.stream(r.Context(), w, id, reply)
	case reply.Hang:
		s.hang(r.Context())
	default:
		writeJSON(w, http.StatusOK, completion(id, reply.Response))
	}
}

// fail answers with the API's own failure for reply.Fail.
func (s *Server) fail(w http.ResponseWriter, reply llmtest.Reply, stream bool) {
	if reply.RetryAfter != "" {
		w.Header().Set("Retry-After", reply.RetryAfter)
	}
	switch reply.Fail {
	case llm.KindRateLimited:
		writeError(w, http.StatusTooManyRequests, apiError{Message: reply.Message, Type: "requests", Code: "rate_limit_exceeded"})
	case llm.KindUnavailable:
		writeError(w, http.StatusServiceUnavailable, apiError{Message: reply.Message, Type: "server_error"})
	case llm.KindMalformed:
		// What a captive proxy or a misrouted gateway answers: a 200 page.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html><body><h1>Welcome</h1>" + reply.Message + "</body></html>\n"))
	case llm.KindInvalidRequest:
		writeError(w, http.StatusBadRequest, apiError{Message: reply.Message, Type: "invalid_request_error", Param: "messages"})
	case llm.KindContextOverflow:
		writeError(w, http.StatusBadRequest, apiError{Message: reply.Message, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded"})
	case llm.KindUnauthorized:
		writeError(w, http.StatusUnauthorized, apiError{Message: reply.Message, Type: "invalid_request_error", Code: "invalid_api_key"})
	case llm.KindRefused:
		// A refusal is a well-formed answer whose message carries refusal text.
		refusal := llm.Response{Model: reply.Response.Model, StopReason: llm.StopEnd, Usage: reply.Response.Usage}
		if stream {
			s.streamRefusal(w, s.nextID(), refusal, reply.Message)
			return
		}
		body := completion(s.nextID(), refusal)
		body.Choices[0].Message.Refusal = &reply.Message
		writeJSON(w, http.StatusOK, body)
	default:
		s.t.Errorf("openaitest: no wire form for failure kind %q", reply.Fail)
		writeError(w, http.StatusInternalServerError, apiError{Message: "unscriptable failure", Type: "server_error"})
	}
}

// hang holds a non-streamed answer until the client goes away.
func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
}

func (s *Server) nextID() string {
	return "chatcmpl-fake-" + itoa(s.ids.Add(1))
}

// bearer is the token of an "Authorization: Bearer <token>" header.
func bearer(header string) string {
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return ""
	}
	return token
}
