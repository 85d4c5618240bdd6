package anthropic_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/anthropic/anthropictest"
)

// sinks are the two ways to call: unstreamed and streamed.
var sinks = map[string]func(llm.Delta){"unstreamed": nil, "streamed": func(llm.Delta) {}}

func TestRequestMapping(t *testing.T) {
	temp := 0.7
	req := llm.Request{Model: "claude-test", Temperature: &temp, // MaxTokens 0
		Tools: []llm.Tool{{Name: "now"}}, // no schema: a tool without arguments
		Messages: []llm.Message{
			llm.UserText("What time is it, and deploy?"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "now"}, {ID: "toolu_2", Name: "deploy",
				Arguments: json.RawMessage(`{"env":"prod"}`)}}},
			{Role: llm.RoleTool, ToolResults: []llm.ToolResult{
				{CallID: "toolu_1", Name: "now", Content: `"14:05"`},
				{CallID: "toolu_2", Name: "deploy", Content: "permission denied", IsError: true},
				{CallID: "toolu_2", Name: "deploy"}, // an empty result
			}},
		}}
	want := req
	want.Temperature, want.MaxTokens = nil, llm.DefaultMaxTokens
	want.Tools = []llm.Tool{{Name: "now", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	want.Messages = append([]llm.Message(nil), req.Messages...)
	want.Messages[1].ToolCalls = []llm.ToolCall{{ID: "toolu_1", Name: "now", Arguments: json.RawMessage(`{}`)}, req.Messages[1].ToolCalls[1]}
	for name, sink := range sinks {
		t.Run(name, func(t *testing.T) {
			srv := anthropictest.NewServer(t)
			srv.Enqueue(plain)
			if _, err := srv.Provider(t, "k").Complete(context.Background(), req, sink); err != nil {
				t.Fatal(err)
			}
			if got := srv.Requests()[0].Request; !llmtest.SameRequest(got, want) {
				t.Errorf("the API got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for _, want := range []llm.Response{
		{Model: "claude-test", Text: "cut o", StopReason: llm.StopMaxTokens, Usage: llm.Usage{InputTokens: 10, OutputTokens: 64}},
		{Model: "claude-test", Text: "until", StopReason: llm.StopSequence, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}},
		// Cache reads and writes are apart from InputTokens on the wire too.
		{Model: "claude-test", Text: "cached", StopReason: llm.StopEnd,
			Usage: llm.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 4000, CacheWriteTokens: 300}},
	} {
		for name, sink := range sinks {
			srv := anthropictest.NewServer(t)
			srv.Enqueue(llmtest.Reply{Response: want})
			got, err := srv.Provider(t, "k").Complete(context.Background(), ask("go"), sink)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: Complete = %+v, %v\nwant %+v", name, got, err, want)
			}
		}
	}
}

// wireMessage is an answer as the API sends it, written out by hand (not
// by the fake), with every usage member.
const wireMessage = `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-6",
"content":[{"type":"thinking","thinking":"The user wants weather.","signature":"EqQBCgIYAhIM"},
{"type":"text","text":"I'll check "},{"type":"text","text":"the weather."},
{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location":"San Francisco, CA"}}],
"stop_reason":"tool_use","stop_sequence":null,"stop_details":null,
"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":89,"service_tier":"standard"}}`

// wireStream is the same answer streamed, as the API sends it.
const wireStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":1}}}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants weather."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"I'll check "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ncisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: content_block_start
data: {"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_02","name":"now","input":{}}}

event: content_block_stop
data: {"type":"content_block_stop","index":3}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null,"stop_details":null},"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

`

// TestRealWireFormat decodes answers written as the API writes them, so
// the provider is not only checked against its own fake: thinking blocks
// are left out, text blocks joined, input_tokens taken as it is (it already
// excludes the cache), and a tool call whose arguments never stream still
// gets its one Delta.
func TestRealWireFormat(t *testing.T) {
	weather := llm.ToolCall{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: json.RawMessage(`{"location":"San Francisco, CA"}`)}
	want := llm.Response{Model: "claude-sonnet-4-6", Text: "I'll check the weather.", StopReason: llm.StopToolUse,
		ToolCalls: []llm.ToolCall{weather},
		Usage:     llm.Usage{InputTokens: 472, OutputTokens: 89, CacheReadTokens: 2048, CacheWriteTokens: 100}}
	p := rawAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, wireMessage)
	})
	got, err := p.Complete(context.Background(), ask("weather?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResponse(t, got, want)

	p = rawAPI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, wireStream)
	})
	var deltas []llm.Delta
	got, err = p.Complete(context.Background(), ask("weather?"), func(d llm.Delta) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	want.ToolCalls = append(want.ToolCalls, llm.ToolCall{ID: "toolu_02", Name: "now", Arguments: json.RawMessage(`{}`)})
	sameResponse(t, got, want)
	wantDeltas := []llm.Delta{{Text: "I'll check "}, {Text: "the weather."},
		{ToolIndex: 0, ToolID: weather.ID, ToolName: weather.Name, Arguments: `{"location": "San Fra`},
		{ToolIndex: 0, Arguments: `ncisco, CA"}`},
		{ToolIndex: 1, ToolID: "toolu_02", ToolName: "now"}}
	if !reflect.DeepEqual(deltas, wantDeltas) {
		t.Errorf("deltas = %+v\nwant     %+v", deltas, wantDeltas)
	}
}

func sameResponse(t *testing.T, got, want llm.Response) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !llmtest.SameJSON(g, w) {
		t.Errorf("response = %s\nwant       %s", g, w)
	}
}

func TestStopReasonsWithoutAnSPIEquivalent(t *testing.T) {
	for reason, want := range map[string]llm.StopReason{
		"model_context_window_exceeded": llm.StopMaxTokens,
		"pause_turn":                    llm.StopEnd,
		"a_reason_from_the_future":      llm.StopEnd,
	} {
		p := rawAPI(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"x"}],
"stop_reason":"`+reason+`","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
		})
		got, err := p.Complete(context.Background(), ask("go"), nil)
		if err != nil || got.StopReason != want {
			t.Errorf("stop_reason %s: Complete = %+v, %v, want stop reason %s", reason, got, err, want)
		}
	}
}

// TestRequestsTheAPICannotTake checks what is refused before sending.
func TestRequestsTheAPICannotTake(t *testing.T) {
	base := ask("go")
	cases := map[string]llm.Request{
		"a tool schema that is not an object": withTools(base, llm.Tool{Name: "t", InputSchema: json.RawMessage(`[1]`)}),
		"tool arguments that are not JSON": withMessages(base, llm.Message{Role: llm.RoleAssistant,
			ToolCalls: []llm.ToolCall{{ID: "c", Name: "t", Arguments: json.RawMessage(`{"a":`)}}}),
		"an unknown role":              withMessages(base, llm.Message{Role: "system", Text: "x"}),
		"tool calls on a user turn":    withMessages(base, llm.Message{Role: llm.RoleUser, ToolCalls: []llm.ToolCall{{ID: "c"}}}),
		"a response schema not JSON":   withFormat(base, json.RawMessage(`{"type":`)),
		"a response schema not an obj": withFormat(base, json.RawMessage(`"object"`)),
		// The SDK sends a call it expects to outlast ten minutes only as a
		// stream.
		"64000 tokens unstreamed": {Model: "claude-test", Messages: base.Messages, MaxTokens: 64000},
	}
	for name, req := range cases {
		srv := anthropictest.NewServer(t)
		_, err := srv.Provider(t, "k").Complete(context.Background(), req, nil)
		if e := asError(t, err, llm.KindInvalidRequest); e.Status != 0 {
			t.Errorf("%s: Status = %d, want 0 (nothing sent)", name, e.Status)
		}
		if n := len(srv.Requests()); n != 0 {
			t.Errorf("%s: %d requests sent, want none", name, n)
		}
	}
	srv := anthropictest.NewServer(t)
	srv.Enqueue(plain)
	long := llm.Request{Model: "claude-test", Messages: base.Messages, MaxTokens: 64000}
	if _, err := srv.Provider(t, "k").Complete(context.Background(), long, func(llm.Delta) {}); err != nil {
		t.Errorf("64000 tokens streamed: %v", err)
	}
}

func withTools(r llm.Request, tools ...llm.Tool) llm.Request { r.Tools = tools; return r }

func withMessages(r llm.Request, m ...llm.Message) llm.Request {
	r.Messages = append(append([]llm.Message(nil), r.Messages...), m...)
	return r
}

func withFormat(r llm.Request, schema json.RawMessage) llm.Request {
	r.ResponseFormat = &llm.ResponseFormat{Name: "f", Schema: schema}
	return r
}
