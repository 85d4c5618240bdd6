package wire_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/wire"
)

// TestSubscribeRaw reads the event stream with a plain HTTP client: the
// framing (id, event, data) and the Last-Event-ID resume are the format.
func TestSubscribeRaw(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"s-1","wait":true}}`)
	parked := eventCount(t, e, "s-1")

	open := func(body, lastID string) (*http.Response, *bufio.Reader) {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.srv.URL+wire.Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, bufio.NewReader(resp.Body)
	}
	resp, r := open(`{"jsonrpc":"2.0","id":2,"method":"execution.subscribe","params":{"executionId":"s-1","from":1}}`, "")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	frames := readFrames(t, r, parked-1)
	if !strings.HasPrefix(frames[0], "id: 1\nevent: envelope\ndata: {") || !strings.Contains(frames[0], `"sequence":1`) {
		t.Fatalf("first frame:\n%s", frames[0])
	}
	e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.resume","params":{"executionId":"s-1","eventType":"approve","payload":{"approved":true}}}`)
	live := readFrames(t, r, 1)
	if !strings.HasPrefix(live[0], "id: "+itoa(parked)+"\n") {
		t.Fatalf("the first live frame:\n%s", live[0])
	}

	_, r = open(`{"jsonrpc":"2.0","id":4,"method":"execution.subscribe","params":{"executionId":"s-1"}}`, itoa(parked))
	if f := readFrames(t, r, 1); !strings.HasPrefix(f[0], "id: "+itoa(parked+1)+"\n") {
		t.Fatalf("Last-Event-ID %d did not resume after it:\n%s", parked, f[0])
	}

	resp, r = open(`{"jsonrpc":"2.0","id":5,"method":"execution.subscribe","params":{"executionId":"nope"}}`, "")
	line, _ := r.ReadString('\n')
	if resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(line, "-32030") {
		t.Fatalf("subscribe to an unknown execution: %s %s", resp.Header.Get("Content-Type"), line)
	}
}

// readFrames reads n SSE events, skipping comments.
func readFrames(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream after %d frames: %v", len(out), err)
		}
		switch {
		case strings.HasPrefix(line, ":"):
		case line == "\n":
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteString(line)
		}
	}
	return out
}

// TestServeEndsStreams: stopping Serve ends open subscriptions with
// CodeUnavailable instead of holding the shutdown.
func TestServeEndsStreams(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"v-1","wait":true}}`)
	h, err := wire.Handler(e.rt, wire.Options{Events: e.events, Authenticate: wire.BearerToken(token, ann)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := wire.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(testCtx(t))
	served := make(chan error, 1)
	go func() { served <- wire.Serve(ctx, ln, h) }()
	c, _ := wire.NewClient(ln.Addr().String(), wire.WithToken(token))
	sub, err := c.Subscribe(testCtx(t), wire.SubscribeParams{ExecutionID: "v-1"})
	if err != nil {
		t.Fatal(err)
	}
	<-sub.Events() // the stream is open
	stop()
	for range sub.Events() {
	}
	var we *wire.Error
	if err := sub.Err(); !errors.As(err, &we) || we.Code != wire.CodeUnavailable {
		t.Fatalf("the stream ended with %v, want CodeUnavailable", err)
	}
	if sub.Last() < 0 {
		t.Fatal("Last after a delivered envelope")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestListenLoopbackByDefault(t *testing.T) {
	for _, addr := range []string{"", ":0", "127.0.0.1:0", "localhost:0"} {
		ln, err := wire.Listen(addr)
		if err != nil {
			t.Fatalf("%q: %v", addr, err)
		}
		host := ln.Addr().String()
		ln.Close()
		if !strings.HasPrefix(host, "127.0.0.1:") && !strings.HasPrefix(host, "[::1]:") {
			t.Fatalf("%q bound %s", addr, host)
		}
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "example.com:80", "10.0.0.1:0"} {
		if _, err := wire.Listen(addr); !errors.Is(err, wire.ErrNotLoopback) {
			t.Fatalf("%q: %v, want ErrNotLoopback", addr, err)
		}
	}
	ln, err := wire.Listen("0.0.0.0:0", wire.AllowRemote())
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
