package mcpserver_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/plugins/mcp/mcpserver"
	"github.com/loom-kernel/loom/store/memstore"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Example exposes a flow as an MCP tool on an insecure loopback server and
// calls it with the official SDK client.
func Example() {
	greet := loom.NewFlow("greet", func(ctx *loom.Context, in struct{ Name string }) (string, error) {
		return "hello " + in.Name, nil
	})
	rt, err := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{greet}})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	srv, err := mcpserver.New(rt, mcpserver.Options{Insecure: true,
		Tools: []mcpserver.FlowTool{{Name: "greet", FlowID: "greet"}}})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(srv.Handler()) // 127.0.0.1
	defer hs.Close()

	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "host", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "greet", Arguments: map[string]any{"Name": "Ada"}})
	if err != nil {
		panic(err)
	}
	out := res.StructuredContent.(map[string]any)
	fmt.Println(out["status"], out["output"], res.IsError)
	// Output: completed hello Ada false
}
