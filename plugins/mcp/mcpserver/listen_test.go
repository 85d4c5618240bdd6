package mcpserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/plugins/mcp/mcpserver"
)

// TestListenBindsLoopback checks an empty address (and an empty host)
// binds 127.0.0.1, the SDK client reaches it, and the endpoint shuts down
// cleanly with its context.
func TestListenBindsLoopback(t *testing.T) {
	f := newFixture(t)
	srv, err := mcpserver.New(f.rt, mcpserver.Options{Insecure: true, Tools: tools()})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"", ":0", "127.0.0.1:0"} {
		ctx, cancel := context.WithCancel(f.ctx())
		e, err := srv.Listen(ctx, addr)
		if err != nil {
			cancel()
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		if !strings.HasPrefix(e.URL, "http://127.0.0.1:") {
			cancel()
			t.Fatalf("Listen(%q) bound %s, want 127.0.0.1", addr, e.URL)
		}
		cs, err := connect(f.ctx(), e.URL, "")
		if err != nil {
			cancel()
			t.Fatalf("connect to %s: %v", e.URL, err)
		}
		if o, isErr := f.call(cs, "greet", map[string]any{"name": "lo"}); isErr || o.Status != "completed" {
			t.Fatalf("greet over %s: %+v", e.URL, o)
		}
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := e.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
}

// TestListenRefusesNonLoopback checks an address beyond this host is
// refused, nothing bound, unless AllowNonLoopback.
func TestListenRefusesNonLoopback(t *testing.T) {
	f := newFixture(t)
	srv, err := mcpserver.New(f.rt, mcpserver.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "example.com:80"} {
		_, err := srv.Listen(f.ctx(), addr)
		var nle *mcpserver.NonLoopbackError
		if !errors.As(err, &nle) {
			t.Fatalf("Listen(%q): %v, want *NonLoopbackError", addr, err)
		}
	}
}
