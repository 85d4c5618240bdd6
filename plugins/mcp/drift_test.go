package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// twoCallsFlow calls tool as "first", parks on "go", then calls the same
// pinned tool as "second"; it returns the second call's typed failure.
func twoCallsFlow(tool mcp.Tool, args any) *loom.Flow {
	return loom.NewFlow("two", func(ctx *loom.Context, _ struct{}) (*loom.TypedFailure, error) {
		if _, err := mcp.Call(ctx, "first", tool, args); err != nil {
			return nil, err
		}
		if _, err := ctx.Suspend("go"); err != nil {
			return nil, err
		}
		_, err := mcp.Call(ctx, "second", tool, args)
		var tf *loom.TypedFailure
		if errors.As(err, &tf) {
			return tf, nil
		}
		return nil, err
	})
}

const driftedSchema = `{"type":"object","properties":{"text":{"type":"string"},"loud":{"type":"boolean"}},"required":["text"]}`

func TestASchemaChangedMidRunFailsTypedSchemaDrift(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     *sdk.ServerOptions
		notifies bool
	}{
		{"listChanged", nil, true},
		// A server that promises no notifications is re-listed on every call.
		{"noNotifications", &sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := liveness(t)
			w := newWorld()
			srv := newServer(w, c.opts)
			client := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, srv, w)})
			echo := listed(t, client)["echo"]
			stores := newStores()
			rt := newRuntime(t, stores, []*loom.Flow{twoCallsFlow(echo, map[string]string{"text": "a"})}, nil, client)
			id, _ := rt.Start(ctx, "two", nil)
			if _, err := rt.WaitForSuspend(ctx, id); err != nil {
				t.Fatal(err)
			}

			// The first call trusted a notifying server's cached listing and
			// re-listed a silent server's.
			if got, want := w.count(listings), map[bool]int{true: 1, false: 2}[c.notifies]; got != want {
				t.Fatalf("%d tools/list requests before the change, want %d", got, want)
			}
			changed := mcp.ToolsChanged(client)
			srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(driftedSchema)},
				func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					w.add("echo")
					return &sdk.CallToolResult{}, nil
				})
			if c.notifies {
				select {
				case <-changed:
				case <-ctx.Done():
					t.Fatal("no tools/list_changed reached the client")
				}
			}
			if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "go"}); err != nil {
				t.Fatal(err)
			}
			res, err := rt.WaitForCompletion(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var tf loom.TypedFailure
			_ = json.Unmarshal(res.Output, &tf)
			var drift mcp.SchemaDrift
			_ = json.Unmarshal(tf.Payload, &drift)
			want, _ := mcp.SchemaHash(json.RawMessage(driftedSchema))
			if tf.Channel != mcp.ChannelSchemaDrift || drift != (mcp.SchemaDrift{Server: "srv", Tool: "echo", Pinned: echo.SchemaHash, Current: want}) {
				t.Fatalf("the second call failed %s %s", tf.Channel, tf.Payload)
			}
			if f := stepEvents(readLog(t, stores, id), event.StepFailed, "second"); len(f) != 1 || string(f[0]["channel"]) != `"schemaDrift"` {
				t.Fatalf("second's STEP_FAILED = %v", f)
			}
			if n := w.count("echo"); n != 1 {
				t.Fatalf("echo was called %d times; the drifted call must not reach it", n)
			}
		})
	}
}

func TestARemovedOrUnknownToolFailsTypedToolNotFound(t *testing.T) {
	ctx := liveness(t)
	w := newWorld()
	srv := newServer(w, nil)
	client := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, srv, w)})
	echo := listed(t, client)["echo"]
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{twoCallsFlow(echo, map[string]string{"text": "a"})}, nil, client)
	id, _ := rt.Start(ctx, "two", nil)
	if _, err := rt.WaitForSuspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	srv.RemoveTools("echo") // the client may or may not have heard of it: the call re-lists before concluding
	if err := rt.Resume(ctx, id, loom.ResumeEvent{EventType: "go"}); err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var tf loom.TypedFailure
	_ = json.Unmarshal(res.Output, &tf)
	if tf.Channel != mcp.ChannelToolNotFound || string(tf.Payload) != `{"server":"srv","tool":"echo"}` {
		t.Fatalf("the second call failed %s %s", tf.Channel, tf.Payload)
	}

	// A tool the server never listed.
	ghost := mcp.Tool{Server: "srv", Name: "ghost", SchemaHash: echo.SchemaHash}
	flow := loom.NewFlow("ghost", func(ctx *loom.Context, _ struct{}) (string, error) {
		_, err := mcp.Call(ctx, "ghost", ghost, nil)
		var tf *loom.TypedFailure
		if errors.As(err, &tf) {
			return tf.Channel, nil
		}
		return "", err
	})
	rt2 := newRuntime(t, newStores(), []*loom.Flow{flow}, nil, client)
	id2, _ := rt2.Start(ctx, "ghost", nil)
	if res, err := rt2.WaitForCompletion(ctx, id2); err != nil || string(res.Output) != `"toolNotFound"` {
		t.Fatalf("ghost: %s, %v", res.Output, err)
	}
	if w.total() != 1 {
		t.Fatalf("the server ran %d calls, want only the first echo", w.total())
	}
}
