package geminitest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/gemini"
)

// maxBody bounds a request body the fake reads.
const maxBody = 8 << 20

// The two calls the SDK makes, as path suffixes of
// POST /v1beta/models/{model}.
const (
	generatePath = ":generateContent"
	streamPath   = ":streamGenerateContent"
)

// Server is a local fake of the Gemini Developer API on loopback. It serves
// POST /v1beta/models/{model}:generateContent (a JSON answer) and
// :streamGenerateContent?alt=sse (server-sent events), decodes each request
// back into an llm.Request with the x-goog-api-key it carried, and answers
// with the next scripted llmtest.Reply in the API's own shapes. Anything
// else fails the test with a 404. It implements llmtest.Server.
type Server struct {
	*llmtest.Script
	t       testing.TB
	srv     *httptest.Server
	closing chan struct{}
	seq     atomic.Int64
}

var _ llmtest.Server = (*Server)(nil)

// NewServer starts a fake server, closed when the test ends (a hanging
// stream is released first).
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{Script: llmtest.NewScript(t), t: t, closing: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.closing)
		s.srv.Close()
	})
	return s
}

// URL is the server's base URL, for gemini.Options.BaseURL.
func (s *Server) URL() string { return s.srv.URL }

// Provider returns a provider aimed at the server, sending apiKey.
func (s *Server) Provider(t testing.TB, apiKey string) *gemini.Provider {
	t.Helper()
	p, err := gemini.New(gemini.Options{Credential: llm.Credential{Key: apiKey}, BaseURL: s.URL(), HTTPClient: s.srv.Client()})
	if err != nil {
		t.Fatalf("gemini.New: %v", err)
	}
	return p
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	model, stream, ok := route(r)
	if !ok {
		s.t.Errorf("geminitest: unexpected request %s %s", r.Method, r.URL)
		writeJSON(w, http.StatusNotFound, wireError{Error: wireErrorBody{Code: 404,
			Message: "Requested entity was not found.", Status: "NOT_FOUND"}})
		return
	}
	if r.URL.Query().Has("key") {
		s.t.Errorf("geminitest: the API key was sent in the URL")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		s.t.Errorf("geminitest: reading the request: %v", err)
		return
	}
	req, err := decodeRequest(body, model)
	if err != nil {
		if !errors.Is(err, errMissingSignature) {
			s.t.Errorf("geminitest: %v\n%s", err, body)
		}
		writeJSON(w, http.StatusBadRequest, wireError{Error: wireErrorBody{Code: 400, Message: err.Error(), Status: "INVALID_ARGUMENT"}})
		return
	}
	reply, ok := s.Next(llmtest.Received{Request: req, Stream: stream, APIKey: r.Header.Get("x-goog-api-key")})
	if !ok {
		writeJSON(w, http.StatusInternalServerError, wireError{Error: wireErrorBody{Code: 500,
			Message: "geminitest: no scripted reply", Status: "INTERNAL"}})
		return
	}
	s.answer(w, r, reply, stream)
}

// route checks the method and path the SDK uses and returns the model named
// in it and whether the call streams.
func route(r *http.Request) (model string, stream bool, ok bool) {
	rest, found := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if r.Method != http.MethodPost || !found {
		return "", false, false
	}
	switch {
	case strings.HasSuffix(rest, generatePath) && r.URL.RawQuery == "":
		model = strings.TrimSuffix(rest, generatePath)
	case strings.HasSuffix(rest, streamPath) && r.URL.Query().Get("alt") == "sse":
		model, stream = strings.TrimSuffix(rest, streamPath), true
	default:
		return "", false, false
	}
	return model, stream, model != "" && !strings.Contains(model, "/")
}

// answer renders reply for a request that did or did not stream.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, reply llmtest.Reply, stream bool) {
	id := fmt.Sprintf("geminitest-%d", s.seq.Add(1))
	resp := reply.Response
	if resp.Usage.CacheWriteTokens != 0 {
		s.t.Errorf("geminitest: the Gemini API reports no cache writes (scripted %d)", resp.Usage.CacheWriteTokens)
	}
	switch reply.Fail {
	case "":
	case llm.KindMalformed:
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		_, _ = io.WriteString(w, "<html><body>upstream proxy error</body></html>")
		return
	case llm.KindRefused:
		answer := refusal(resp.Model, id, resp.Usage.InputTokens)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_ = writeEvent(w, answer)
			return
		}
		writeJSON(w, http.StatusOK, answer)
		return
	default:
		status, body, ok := apiError(reply)
		if !ok {
			s.t.Errorf("geminitest: no Gemini error for failure kind %q", reply.Fail)
			status, body = http.StatusInternalServerError, wireError{Error: wireErrorBody{Code: 500, Message: "internal error", Status: "INTERNAL"}}
		}
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		writeJSON(w, status, body)
		return
	}
	if !stream {
		writeJSON(w, http.StatusOK, answerBody(resp, id))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunks := streamChunks(resp, id)
	if reply.Hang {
		chunks = chunks[:1]
		chunks[0].Candidates[0].FinishReason = ""
	}
	for _, c := range chunks {
		if writeEvent(w, c) != nil {
			return
		}
	}
	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
	}
}
