package mcp_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/middleware"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// callsFlow calls echo, add and fail as durable steps, then parks on
// "done" so a new runtime can resume (replay) it.
func callsFlow(tools map[string]mcp.Tool) *loom.Flow {
	return loom.NewFlow("calls", func(ctx *loom.Context, _ struct{}) (map[string]string, error) {
		out := map[string]string{}
		echo, err := mcp.Call(ctx, "echo", tools["echo"], map[string]string{"text": "hello"})
		if err != nil {
			return nil, err
		}
		sum, err := mcp.Call(ctx, "add", tools["add"], map[string]int{"a": 2, "b": 3})
		if err != nil {
			return nil, err
		}
		out["echo"], out["add"] = string(echo), string(sum)
		_, err = mcp.Call(ctx, "fail", tools["fail"], nil)
		var tf *loom.TypedFailure
		if !errors.As(err, &tf) {
			return nil, fmt.Errorf("fail answered %v, want a typed failure", err)
		}
		out["fail"] = tf.Channel + " " + string(tf.Payload)
		if _, err := ctx.Suspend("done"); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// callCounter is either server's call count.
type callCounter interface{ count(tool string) int }

func TestCallsAreDurableStepsServedFromTheLogOnReplay(t *testing.T) {
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			ctx := liveness(t)
			var cfg mcp.ServerConfig
			var calls callCounter
			if transport == "http" {
				w := newWorld()
				cfg, calls = mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w)}, w
			} else {
				var fc *fileCounter
				cfg, fc = stdioConfig(t, "srv")
				calls = fc
			}
			c := connect(t, cfg)
			tools := listed(t, c)
			if len(tools) != 3 || tools["echo"].Description != "Echo the text." || !strings.Contains(string(tools["echo"].InputSchema), `"text"`) {
				t.Fatalf("tools = %+v", tools)
			}
			if h, _ := mcp.SchemaHash(tools["echo"].InputSchema); h != tools["echo"].SchemaHash || !strings.HasPrefix(h, "sha256:") {
				t.Fatalf("echo's pin %q, its schema hashes to %q", tools["echo"].SchemaHash, h)
			}
			stores := newStores()
			flows := []*loom.Flow{callsFlow(tools)}
			rt := newRuntime(t, stores, flows, nil, c)
			id, err := rt.Start(ctx, "calls", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.WaitForSuspend(ctx, id); err != nil {
				t.Fatal(err)
			}
			_ = rt.Close()
			for _, tool := range []string{"echo", "add", "fail"} {
				if n := calls.count(tool); n != 1 {
					t.Fatalf("%s was called %d times, want 1", tool, n)
				}
			}
			log := readLog(t, stores, id)
			started := stepEvents(log, event.StepStarted, "echo")
			if len(started) != 1 {
				t.Fatalf("echo started %d times", len(started))
			}
			var inv mcp.Invocation
			if err := json.Unmarshal(started[0]["input"], &inv); err != nil {
				t.Fatal(err)
			}
			var toolID string
			_ = json.Unmarshal(started[0]["toolId"], &toolID)
			if inv.Server != "srv" || inv.Tool != "echo" || string(inv.Arguments) != `{"text":"hello"}` ||
				inv.SchemaHash != tools["echo"].SchemaHash || toolID != "mcp.invoke:srv/echo" {
				t.Fatalf("STEP_STARTED records %+v under %q", inv, toolID)
			}
			if f := stepEvents(log, event.StepFailed, "fail"); len(f) != 1 || string(f[0]["channel"]) != `"toolError"` {
				t.Fatalf("fail's STEP_FAILED = %v", f)
			}

			// Replay in a new runtime: every call is served from the log.
			rt2 := newRuntime(t, stores, flows, nil, c)
			if err := rt2.Resume(ctx, id, loom.ResumeEvent{EventType: "done"}); err != nil {
				t.Fatal(err)
			}
			res, err := rt2.WaitForCompletion(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var out map[string]string
			if err := json.Unmarshal(res.Output, &out); err != nil {
				t.Fatal(err)
			}
			if out["echo"] != `"hello"` || out["add"] != `{"sum":5}` || out["fail"] != `toolError {"message":"the disk is full"}` {
				t.Fatalf("output = %v", out)
			}
			for _, tool := range []string{"echo", "add", "fail"} {
				if n := calls.count(tool); n != 1 {
					t.Fatalf("after the replay %s was called %d times, want 1", tool, n)
				}
			}
		})
	}
}

func TestTheBearerCredentialReachesTheServerAndNeverTheLog(t *testing.T) {
	ctx := liveness(t)
	const key = "sk-mcp-7f3a9c2e1b"
	w := newWorld()
	cred := llm.Credential{Secret: "docs-token", Resolver: middleware.StaticSecrets{"docs-token": key}}
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w), Auth: cred})
	tools := listed(t, c)
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{callsFlow(tools)}, nil, c)
	id, err := rt.Start(ctx, "calls", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	seen := w.authHeaders()
	if len(seen) == 0 {
		t.Fatal("the server saw no request")
	}
	for i, h := range seen {
		if h != "Bearer "+key {
			t.Fatalf("request %d carried Authorization %q", i, h)
		}
	}
	if log := readLog(t, stores, id); logHolds(log, key) {
		t.Fatal("the credential is in the log")
	}

	// A credential that does not resolve fails the connection, naming the
	// reference only.
	_, err = mcp.Connect(ctx, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w),
		Auth: llm.Credential{Secret: "missing", Resolver: middleware.StaticSecrets{"docs-token": key}}})
	if !errors.Is(err, llm.ErrNoCredential) || strings.Contains(err.Error(), key) {
		t.Fatalf("Connect with an unresolvable credential = %v", err)
	}
}

func TestInvalidConfigsAndArgumentsAreRefusedTyped(t *testing.T) {
	ctx := liveness(t)
	for _, cfg := range []mcp.ServerConfig{
		{URL: "http://127.0.0.1:1"},
		{Name: "a/b", URL: "http://127.0.0.1:1"},
		{Name: strings.Repeat("x", mcp.MaxServerNameBytes+1), URL: "http://127.0.0.1:1"},
		{Name: "s"},
		{Name: "s", URL: "http://127.0.0.1:1", Command: []string{"true"}},
		{Name: "s", Command: []string{""}},
		{Name: "s", Command: []string{"true"}, Auth: llm.Credential{Key: "k"}},
	} {
		var ce *mcp.ConfigError
		if _, err := mcp.Connect(ctx, cfg); !errors.As(err, &ce) {
			t.Errorf("Connect(%+v) = %v, want a *mcp.ConfigError", cfg, err)
		}
	}

	// Arguments that are no JSON object are refused before anything is
	// recorded or sent.
	w := newWorld()
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w)})
	tools := listed(t, c)
	flow := loom.NewFlow("bad", func(ctx *loom.Context, _ struct{}) (string, error) {
		for _, args := range []any{"text", []int{1}, 7, func() {}} {
			_, err := mcp.Call(ctx, "echo", tools["echo"], args)
			var ae *mcp.ArgumentsError
			if !errors.As(err, &ae) {
				return "", fmt.Errorf("Call(%v) = %v, want *mcp.ArgumentsError", args, err)
			}
		}
		return "refused", nil
	})
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{flow}, nil, c)
	id, _ := rt.Start(ctx, "bad", nil)
	if res, err := rt.WaitForCompletion(ctx, id); err != nil || string(res.Output) != `"refused"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	log := readLog(t, stores, id)
	if n := countType(log, event.StepStarted) + countType(log, event.StepFailed); n != 0 || w.total() != 0 {
		t.Fatalf("a refused call left %d step events and made %d calls", n, w.total())
	}
}
