package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/plugins/mcp"
	"github.com/loom-kernel/loom/store/memstore"
)

// A flow calls an MCP server's tool as a durable step: the call's
// Invocation is recorded, and a replay serves its output from the log.
func Example() {
	// An MCP server with one tool, on loopback.
	server := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "v1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "search", Description: "Search the docs."},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Query string `json:"query"`
		}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "3 pages about " + in.Query}}}, nil, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer srv.Close()

	ctx := context.Background()
	client, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "docs", URL: srv.URL})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := client.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()
	search, err := client.Tool(ctx, "search")
	if err != nil {
		panic(err)
	}
	fmt.Println(search.ID())

	effects, err := effect.NewRegistry(mcp.Effects(client))
	if err != nil {
		panic(err)
	}
	flow := loom.NewFlow("ask", func(ctx *loom.Context, q string) (string, error) {
		out, err := mcp.Call(ctx, "search", search, map[string]string{"query": q})
		if err != nil {
			return "", err
		}
		var text string // a text result is one JSON string
		return text, json.Unmarshal(out, &text)
	})
	rt, err := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}, Effects: effects})
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			fmt.Println("close:", err)
		}
	}()
	id, err := rt.Start(ctx, "ask", "retries")
	if err != nil {
		panic(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Output))
	// Output:
	// mcp.invoke:docs/search
	// "3 pages about retries"
}
