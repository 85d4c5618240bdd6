package agent_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/store/memstore"
)

// Run is the agent loop: each model turn and each tool call is a durable
// step, and a tool that needs approval parks the run on a gate bound to the
// exact call.
func ExampleRun() {
	model := llmtest.NewProvider(nil, "anthropic") // a scripted stand-in for a real provider
	model.Enqueue(
		llmtest.Calls(300, 20, "restart", `{"service":"checkout"}`),
		llmtest.Text("Restarted checkout.", 400, 10))

	restart := agent.NewTool("restart", "Restart a service.", func(_ context.Context, in struct {
		Service string `json:"service"`
	}) (string, error) {
		return in.Service + " restarted", nil
	}, agent.NeedsApproval())
	cfg := agent.Config{ID: "oncall", Provider: model, Model: "claude-sonnet-4-5", Tools: []*agent.Tool{restart}}
	flow := loom.NewFlow("oncall", func(ctx *loom.Context, q string) (string, error) {
		res, err := agent.Run(ctx, cfg, llm.UserText(q))
		return res.Text, err
	}, agent.FlowOptions(cfg)...)

	rt, _ := loom.New(loom.Config{Storage: memstore.NewSet(), Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "oncall", "checkout is stuck")
	st, _ := rt.WaitForSuspend(ctx, id)
	gate := st.Variables.SuspendedOn.On
	fmt.Println("waiting on", gate[:len(agent.GatePrefix)+len("restart:")]+"…")

	answer, _ := json.Marshal(agent.Answer{Decision: agent.DecisionApprove, By: "ada"})
	_ = rt.Resume(ctx, id, loom.ResumeEvent{EventType: gate, Payload: answer})
	res, _ := rt.WaitForCompletion(ctx, id)
	fmt.Println(string(res.Output))
	// Output:
	// waiting on approve.restart:…
	// "Restarted checkout."
}
