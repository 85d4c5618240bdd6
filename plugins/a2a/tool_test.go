package a2a_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/llm"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store/memstore"
)

// followingModel calls the tool, answers its input-required result by
// calling it again with the task's ids, and then reports the outcome.
type followingModel struct {
	tool string
	mu   sync.Mutex
	seen []a2a.Outcome
}

func (m *followingModel) Name() string { return "following" }

func (m *followingModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	call := func(args string) llm.Response {
		return llm.Response{StopReason: llm.StopToolUse, ToolCalls: []llm.ToolCall{{ID: "c", Name: m.tool, Arguments: []byte(args)}}}
	}
	if len(last.ToolResults) == 0 {
		return call(`{"message":"paint the shed"}`), nil
	}
	var o a2a.Outcome
	if err := json.Unmarshal([]byte(last.ToolResults[0].Content), &o); err != nil {
		return llm.Response{StopReason: llm.StopEnd, Text: "unreadable result: " + last.ToolResults[0].Content}, nil
	}
	m.mu.Lock()
	m.seen = append(m.seen, o)
	m.mu.Unlock()
	if o.State == a2a.StateInputRequired {
		args, _ := json.Marshal(map[string]string{"message": "blue", "taskId": o.TaskID, "contextId": o.ContextID})
		return call(string(args)), nil
	}
	return llm.Response{StopReason: llm.StopEnd, Text: "the shed: " + o.Text}, nil
}

// An agent tool returns the remote's input-required outcome to the model,
// which answers it through the same tool.
func TestAgentToolReturnsInputRequiredToTheModel(t *testing.T) {
	remote, url := sdkPainter(t)
	ctx := testContext(t)
	peer, err := a2a.Discover(ctx, url, a2a.ClientOptions{Auth: llm.Credential{Key: painterKey}})
	if err != nil {
		t.Fatal(err)
	}
	tool := a2a.AgentTool(peer)
	def := tool.Definition()
	if def.Name != "Painter_Bot_" || !strings.Contains(def.Description, "Paints things.") || !strings.Contains(def.Description, "Skill paint") {
		t.Fatalf("tool %+v", def)
	}
	model := &followingModel{tool: def.Name}
	cfg := agent.Config{ID: "helper", Provider: model, Model: "m", Tools: []*agent.Tool{tool}, MaxTurns: 5}
	flow := loom.NewFlow("helper", func(ctx *loom.Context, _ struct{}) (agent.Result, error) {
		return agent.Run(ctx, cfg, llm.UserText("get the shed painted"))
	}, agent.FlowOptions(cfg)...)
	stores := memstore.NewSet()
	rt := newRuntime(t, stores, a2a.Effects(peer), flow)
	id, err := rt.Start(ctx, "helper", nil)
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
	if r.Text != "the shed: painted blue" {
		t.Fatalf("result %q", r.Text)
	}
	if len(model.seen) != 2 || model.seen[0].State != a2a.StateInputRequired || model.seen[1].TaskID != model.seen[0].TaskID {
		t.Fatalf("the model saw %+v", model.seen)
	}
	if n := remote.calls.Load(); n != 2 {
		t.Fatalf("%d remote calls", n)
	}
}
