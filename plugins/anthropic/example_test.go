package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
)

// A provider streams an answer that calls a tool. The fake Messages API on
// loopback stands in for api.anthropic.com, so the example runs offline;
// against the real API, leave BaseURL empty and set ANTHROPIC_API_KEY.
func Example() {
	fake := anthropictest.Start()
	defer func() {
		if err := fake.Close(); err != nil {
			fmt.Println("fake:", err)
		}
	}()
	fake.Enqueue(llmtest.Reply{Response: llm.Response{
		Model: "claude-sonnet-4-6", Text: "Checking the logs.", StopReason: llm.StopToolUse,
		ToolCalls: []llm.ToolCall{{ID: "toolu_01", Name: "read_logs", Arguments: json.RawMessage(`{"service":"checkout"}`)}},
		Usage:     llm.Usage{InputTokens: 120, OutputTokens: 18, CacheReadTokens: 900},
	}})

	p, err := anthropic.New(anthropic.Options{Credential: llm.Credential{Key: "sk-ant-example"}, BaseURL: fake.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := llm.Request{
		Model:  "claude-sonnet-4-6",
		System: "You are the on-call assistant.",
		Tools: []llm.Tool{{Name: "read_logs", Description: "Read a service's recent logs.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"service":{"type":"string"}},"required":["service"]}`)}},
		Messages: []llm.Message{llm.UserText("checkout is slow")},
	}
	resp, err := p.Complete(context.Background(), req, func(d llm.Delta) {
		switch {
		case d.Text != "":
			fmt.Printf("text %q\n", d.Text)
		case d.ToolID != "":
			fmt.Printf("call %d: %s %s, arguments %s\n", d.ToolIndex, d.ToolID, d.ToolName, d.Arguments)
		default:
			fmt.Printf("call %d: arguments %s\n", d.ToolIndex, d.Arguments)
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StopReason, resp.ToolCalls[0].Name, string(resp.ToolCalls[0].Arguments), resp.Usage.Total())
	// Output:
	// text "Check"
	// text "ing t"
	// text "he lo"
	// text "gs."
	// call 0: toolu_01 read_logs, arguments {"servic
	// call 0: arguments e":"chec
	// call 0: arguments kout"}
	// toolUse read_logs {"service":"checkout"} 1038
}
