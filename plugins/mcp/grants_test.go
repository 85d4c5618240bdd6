package mcp_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// echoThenAdd calls echo and then add, reporting how each ended.
func echoThenAdd(tools map[string]mcp.Tool) *loom.Flow {
	return loom.NewFlow("both", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, errEcho := mcp.Call(ctx, "echo", tools["echo"], map[string]string{"text": "hi"})
		_, errAdd := mcp.Call(ctx, "add", tools["add"], map[string]int{"a": 1, "b": 1})
		var denied *effect.CapabilityDeniedError
		return fmt.Sprintf("echo:%v add-denied:%v", errEcho, errors.As(errAdd, &denied)), nil
	})
}

func TestAGrantCanAllowOneToolOfAServer(t *testing.T) {
	ctx := liveness(t)
	w := newWorld()
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w)})
	grants := effect.NewGrantTable()
	if err := grants.Grant("alice", "mcp.invoke:srv/echo"); err != nil {
		t.Fatal(err)
	}
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{echoThenAdd(listed(t, c))}, func(cfg *loom.Config) { cfg.EffectAuthorizer = grants }, c)
	id, err := rt.Start(loom.WithPrincipal(ctx, "alice"), "both", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil || string(res.Output) != `"echo:\u003cnil\u003e add-denied:true"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	log := readLog(t, stores, id)
	if n := countType(log, event.EffectDenied); n != 1 || !strings.Contains(string(denial(log)), "mcp.invoke:srv/add") {
		t.Fatalf("EFFECT_DENIED ×%d: %s", n, denial(log))
	}
	if w.count("echo") != 1 || w.count("add") != 0 {
		t.Fatalf("calls = %v; the denied tool must not run", w.calls)
	}
}

func denial(log []event.Envelope) []byte {
	for _, e := range log {
		if e.Type == event.EffectDenied {
			return e.Payload
		}
	}
	return nil
}

// An Invocation must name exactly the tool of its step's tool id, which is
// what grants and policies judged: one naming another tool, or a server no
// client serves, is refused before the server is asked.
func TestAnInvocationThatIsNotItsToolIDIsRefused(t *testing.T) {
	ctx := liveness(t)
	w := newWorld()
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w)})
	tools := listed(t, c)
	grants := effect.NewGrantTable()
	if err := grants.Grant("alice", "mcp.invoke:srv/echo"); err != nil {
		t.Fatal(err)
	}
	add := tools["add"]
	cases := map[string]mcp.Invocation{
		"another tool":  {Server: "srv", Tool: "add", Arguments: []byte(`{"a":1,"b":2}`), SchemaHash: add.SchemaHash},
		"other server":  {Server: "elsewhere", Tool: "echo", Arguments: []byte(`{}`), SchemaHash: add.SchemaHash},
		"no pin":        {Server: "srv", Tool: "echo", Arguments: []byte(`{"text":"x"}`)},
		"not an object": {Server: "srv", Tool: "echo", Arguments: []byte(`[1]`), SchemaHash: tools["echo"].SchemaHash},
	}
	flow := loom.NewFlow("forge", func(ctx *loom.Context, name string) (string, error) {
		_, err := ctx.Execute(mcp.Task(tools["echo"], "forged"), cases[name])
		var ie *mcp.InvocationError
		if errors.As(err, &ie) {
			return "refused", nil
		}
		return "", fmt.Errorf("the forged invocation answered %v", err)
	})
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{flow}, func(cfg *loom.Config) { cfg.EffectAuthorizer = grants }, c)
	for name := range cases { //loom:order-independent each case on its own
		id, err := rt.Start(loom.WithPrincipal(ctx, "alice"), "forge", name)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := rt.WaitForCompletion(ctx, id); err != nil || string(res.Output) != `"refused"` {
			t.Errorf("%s: %s, %v", name, res.Output, err)
		}
	}
	if w.total() != 0 {
		t.Fatalf("a refused invocation reached the server: %v", w.calls)
	}
}
