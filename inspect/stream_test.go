package inspect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/inspect"
)

// sseEvent is one server-sent event as a page's EventSource reads it.
type sseEvent struct{ id, name, data string }

// sseStream is an open event stream of the inspector, read frame by frame.
type sseStream struct {
	resp *http.Response
	r    *bufio.Reader
}

// openSSE opens an event stream at path (with a Last-Event-ID when last is
// not empty), checks it is one, and reads the "retry" line that opens it.
// The stream is closed when the test ends, or earlier by Close.
func openSSE(t *testing.T, ctx context.Context, srv *httptest.Server, path, last string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s %s", path, resp.StatusCode, ct, b)
	}
	s := &sseStream{resp: resp, r: bufio.NewReader(resp.Body)}
	if line, err := s.r.ReadString('\n'); err != nil || line != "retry: 1000\n" {
		t.Fatalf("%s opens with %q, %v; want the retry line", path, line, err)
	}
	if line, err := s.r.ReadString('\n'); err != nil || line != "\n" {
		t.Fatalf("%s: %q after the retry line, %v", path, line, err)
	}
	return s
}

// next reads the next event, skipping comments (heartbeats). It returns
// io.EOF when the server ended the stream between events.
func (s *sseStream) next() (sseEvent, error) {
	var e sseEvent
	started := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && !started && line == "" {
				return e, io.EOF
			}
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && started:
			return e, nil
		case line == "", strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			e.id, started = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			e.name, started = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			if started && e.data != "" {
				return e, errors.New("an event with two data lines: " + line)
			}
			e.data, started = strings.TrimPrefix(line, "data: "), true
		default:
			return e, errors.New("not a line of an event stream: " + line)
		}
	}
}

// mustNext is next, failing the test on an error or an event not named name.
func (s *sseStream) mustNext(t *testing.T, name string) sseEvent {
	t.Helper()
	e, err := s.next()
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	if e.name != name {
		t.Fatalf("an event %q (%s), want %q", e.name, e.data, name)
	}
	return e
}

// mustEnd reads the stream to its end, failing on any event before it.
func (s *sseStream) mustEnd(t *testing.T) {
	t.Helper()
	if e, err := s.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream did not end: %+v %v", e, err)
	}
}

// serve serves an Inspector over src on loopback; it is closed (its streams
// ended first) when the test ends.
func serve(t *testing.T, src inspect.Source, opts inspect.Options) (*inspect.Inspector, *httptest.Server) {
	t.Helper()
	in, err := inspect.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	t.Cleanup(in.Close) // first: a server's Close waits for its streams
	return in, srv
}

// getBody GETs path and returns the status and the body.
func getBody(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestStreamsEndOnClose: Close ends every open stream (the list, a watch,
// a log tail) and refuses new ones with a JSON error, while the rest of the
// API still answers.
func TestStreamsEndOnClose(t *testing.T) {
	w := newWorld(t)
	in, srv := serve(t, w.src, inspect.Options{ListPoll: inspect.MinListPoll})
	ctx := testContext(t)
	list := openSSE(t, ctx, srv, "/api/executions/live", "")
	list.mustNext(t, "executions")
	watch := openSSE(t, ctx, srv, "/api/watch?id=parked", "")
	watch.mustNext(t, "state")
	tail := openSSE(t, ctx, srv, "/api/live?id=parked", "")
	tail.mustNext(t, "envelope")

	in.Close()
	for _, s := range []*sseStream{list, watch, tail} {
		for {
			if _, err := s.next(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("a stream ended with %v, want its end", err)
				}
				break
			}
		}
	}
	for _, path := range []string{"/api/executions/live", "/api/watch?id=parked", "/api/live?id=parked"} {
		code, body := getBody(t, srv, path)
		var refusal struct{ Error string }
		if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &refusal) != nil || refusal.Error == "" {
			t.Fatalf("%s after Close: %d %s", path, code, body)
		}
	}
	if code, _ := getBody(t, srv, "/api/state?id=parked"); code != http.StatusOK {
		t.Fatalf("/api/state after Close: %d", code)
	}
}

// TestHeadOfAStreamIsItsHeaders: HEAD of a stream answers its headers and
// ends, as every HEAD does: the connection is free for the next request
// (the client here has one connection, so a HEAD left streaming would hold
// the next request until the test's deadline). A refusal is the JSON
// error of the GET.
func TestHeadOfAStreamIsItsHeaders(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w.src, inspect.Options{ListPoll: inspect.MinListPoll})
	ctx := testContext(t)
	transport := srv.Client().Transport.(*http.Transport).Clone()
	transport.MaxConnsPerHost = 1
	client := &http.Client{Transport: transport}
	t.Cleanup(client.CloseIdleConnections)
	do := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, path := range []string{"/api/executions/live", "/api/watch?id=parked", "/api/live?id=parked"} {
		if resp := do(http.MethodHead, path); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp := do(http.MethodGet, "/api/state?id=parked"); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/state after HEAD %s: %d", path, resp.StatusCode)
		}
	}
	if resp := do(http.MethodHead, "/api/watch?id=nope"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HEAD of an unknown execution's watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
