package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// agentFlow runs an agent over the MCP tools as the flow "agent".
func agentFlow(p llm.Provider, tools []*agent.Tool, mod func(*agent.Config)) *loom.Flow {
	cfg := agent.Config{ID: "ops", Provider: p, Model: "claude-sonnet-4-5", System: "Use the tools.", Tools: tools}
	if mod != nil {
		mod(&cfg)
	}
	return loom.NewFlow("agent", func(ctx *loom.Context, q string) (agent.Result, error) {
		return agent.Run(ctx, cfg, llm.UserText(q))
	}, agent.FlowOptions(cfg)...)
}

// sortedTools lists c's tools (already sorted by name).
func sortedTools(t testing.TB, c *mcp.Client) []mcp.Tool {
	t.Helper()
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !sort.SliceIsSorted(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name }) {
		t.Fatal("Tools is not sorted by name")
	}
	return tools
}

func TestAnAgentCallsMCPToolsAndIsToldAnIsErrorResult(t *testing.T) {
	ctx := liveness(t)
	w := newWorld()
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, newServer(w, nil), w)})
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(
		llmtest.Calls(10, 5, "srv_echo", `{"text":"hi"}`, "srv_fail", `{}`),
		llmtest.Text("The disk is full.", 20, 5))
	stores := newStores()
	rt := newRuntime(t, stores, []*loom.Flow{agentFlow(p, mcp.AgentTools(sortedTools(t, c)), nil)}, nil, c)
	id, err := rt.Start(ctx, "agent", "what is wrong?")
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.WaitForCompletion(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var r agent.Result
	if err := json.Unmarshal(res.Output, &r); err != nil {
		t.Fatal(err)
	}
	if r.Text != "The disk is full." || len(r.ToolCalls) != 2 || r.ToolCalls[0].Status != agent.StatusOK || r.ToolCalls[1].Status != agent.StatusError {
		t.Fatalf("result = %+v", r)
	}
	reqs := p.Requests()
	if defs := reqs[0].Request.Tools; len(defs) != 3 || defs[0].Name != "srv_add" || !strings.Contains(string(defs[1].InputSchema), `"text"`) {
		t.Fatalf("the model was offered %+v", defs)
	}
	results := reqs[1].Request.Messages[len(reqs[1].Request.Messages)-1].ToolResults
	if len(results) != 2 || results[0].IsError || results[0].Content != `"hi"` ||
		!results[1].IsError || !strings.Contains(results[1].Content, "the disk is full") {
		t.Fatalf("the model was told %+v", results)
	}
	if f := stepEvents(readLog(t, stores, id), "STEP_STARTED", "ops/turn:1/tool:0"); len(f) != 1 || !strings.Contains(string(f[0]["input"]), `"schemaHash"`) {
		t.Fatalf("the tool step's STEP_STARTED = %v", f)
	}
	if w.count("echo") != 1 || w.count("fail") != 1 {
		t.Fatalf("calls = %v", w.calls)
	}
}

func TestASchemaDriftEndsTheAgentRunTyped(t *testing.T) {
	ctx := liveness(t)
	w := newWorld()
	srv := newServer(w, nil)
	c := connect(t, mcp.ServerConfig{Name: "srv", URL: serveHTTP(t, srv, w)})
	tools := mcp.AgentTools(sortedTools(t, c))
	changed := mcp.ToolsChanged(c)
	srv.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(driftedSchema)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed reached the client")
	}
	p := llmtest.NewProvider(t, "anthropic")
	p.Enqueue(llmtest.Calls(10, 5, "srv_echo", `{"text":"hi"}`))
	flow := loom.NewFlow("agent", func(ctx *loom.Context, q string) (string, error) {
		_, err := agent.Run(ctx, agent.Config{ID: "ops", Provider: p, Model: "m", Tools: tools}, llm.UserText(q))
		var tf *loom.TypedFailure
		if errors.As(err, &tf) {
			return tf.Channel, nil
		}
		return "", fmt.Errorf("the run ended %v, want a typed failure", err)
	})
	rt := newRuntime(t, newStores(), []*loom.Flow{flow}, nil, c)
	id, _ := rt.Start(ctx, "agent", "q")
	if res, err := rt.WaitForCompletion(ctx, id); err != nil || string(res.Output) != `"schemaDrift"` {
		t.Fatalf("result %s, %v", res.Output, err)
	}
	if w.count("echo") != 0 || len(p.Requests()) != 1 {
		t.Fatalf("calls %v, model requests %d", w.calls, len(p.Requests()))
	}
}

func TestTheToolErrorChannelIsTheAgentLoops(t *testing.T) {
	if mcp.MaxErrorBytes != agent.MaxToolErrorBytes || mcp.ChannelToolError != "toolError" {
		t.Fatalf("toolError: %d bytes on %q; the agent loop bounds %d", mcp.MaxErrorBytes, mcp.ChannelToolError, agent.MaxToolErrorBytes)
	}
}

func TestModelNamesAreValidForModelAPIs(t *testing.T) {
	for _, c := range []struct {
		server, tool, want string
	}{
		{"docs", "search", "docs_search"},
		{"docs", "search-v2", "docs_search-v2"},
		{"docs", "files.read", "docs_files_read_"},
		{"9srv", "x", "_9srv_x_"},
		{"s", strings.Repeat("t", 80), "s_ttt"},
	} {
		got := mcp.ModelName(mcp.Tool{Server: c.server, Name: c.tool})
		if !strings.HasPrefix(got, c.want) || len(got) > mcp.MaxModelNameBytes {
			t.Errorf("ModelName(%s/%s) = %q, want %q…", c.server, c.tool, got, c.want)
		}
		for _, r := range got {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				t.Errorf("ModelName(%s/%s) = %q holds %q", c.server, c.tool, got, r)
			}
		}
	}
	a := mcp.ModelName(mcp.Tool{Server: "docs", Name: "a.b"})
	b := mcp.ModelName(mcp.Tool{Server: "docs", Name: "a_b"})
	if a == b {
		t.Fatalf("docs/a.b and docs/a_b share the model name %q", a)
	}
}
