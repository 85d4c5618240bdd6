package gemini_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	"github.com/loom-kernel/loom/plugins/gemini/geminitest"
)

func TestUsageWithCachedTokens(t *testing.T) {
	srv := geminitest.NewServer(t)
	want := llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 900}
	srv.Enqueue(llmtest.Reply{Response: llm.Response{Model: "gemini-test", Text: "cached", StopReason: llm.StopEnd, Usage: want}})
	got, err := srv.Provider(t, llmtest.APIKey).Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage != want || got.Usage.Total() != 1020 {
		t.Fatalf("usage = %+v, want %+v (promptTokenCount 1000 includes the 900 cached)", got.Usage, want)
	}
}

// TestUsageCountsThoughtsAndToolPrompts bills thinking as output and the
// prompt tokens of tool use as input.
func TestUsageCountsThoughtsAndToolPrompts(t *testing.T) {
	p, _ := rawServer(t, answerWith(200, nil, `{"candidates":[{"content":{"role":"model","parts":[
{"text":"Let me think.","thought":true},{"text":"Done."}]},"finishReason":"STOP"}],
"usageMetadata":{"promptTokenCount":1000,"cachedContentTokenCount":900,"candidatesTokenCount":20,
"thoughtsTokenCount":30,"toolUsePromptTokenCount":5,"totalTokenCount":1055},"modelVersion":"gemini-2.5-pro"}`))
	got, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 105, OutputTokens: 50, CacheReadTokens: 900}
	if got.Usage != want || got.Text != "Done." || got.Model != "gemini-2.5-pro" {
		t.Fatalf("response = %+v, want text %q (the thought skipped), usage %+v", got, "Done.", want)
	}
}

// TestToolResultsRoundTrip sends each form of tool result content and
// checks what the server decoded against Normalize.
func TestToolResultsRoundTrip(t *testing.T) {
	results := []llm.ToolResult{
		{CallID: "c1", Name: "lookup", Content: "plain text, not JSON"},
		{CallID: "c1", Name: "lookup", Content: `{"b":[1,2.5,true],"a":{"nested":"<ok>"}}`},
		{CallID: "c1", Name: "lookup", Content: `{"id":12345678901234567890}`},
		{CallID: "c1", Name: "lookup", Content: "permission denied", IsError: true},
		{CallID: "c1", Name: "lookup", Content: `{"code":7}`, IsError: true},
		{CallID: "c1", Content: `["an","array"]`},
	}
	req := llm.Request{Model: "gemini-test", Messages: []llm.Message{
		llm.UserText("look it up"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup"}}},
		{Role: llm.RoleTool, ToolResults: results},
	}}
	srv := geminitest.NewServer(t)
	srv.Enqueue(plain)
	if _, err := srv.Provider(t, llmtest.APIKey).Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0].Request
	if want := geminitest.Normalize(req); !llmtest.SameRequest(got, want) {
		t.Fatalf("decoded %+v\nwant    %+v", got.Messages, want.Messages)
	}
	decoded := got.Messages[2].ToolResults
	if decoded[2].Content != `{"id":12345678901234567890}` {
		t.Errorf("a result with a large integer came back as %q: it must travel as a string, unchanged", decoded[2].Content)
	}
	if decoded[1].Content != `{"a":{"nested":"\u003cok\u003e"},"b":[1,2.5,true]}` {
		t.Errorf("an object result came back as %q", decoded[1].Content)
	}
	if !decoded[3].IsError || !decoded[4].IsError || decoded[0].IsError {
		t.Errorf("error flags came back as %v %v %v, want false true true", decoded[0].IsError, decoded[3].IsError, decoded[4].IsError)
	}
	if decoded[5].Name != "lookup" {
		t.Errorf("a result without a name went out named %q, want its call's name", decoded[5].Name)
	}
}

// TestReplayedCallsCarryTheSkipSignature checks the thought signature
// Google documents for calls whose real signature is gone: without one, a
// Gemini 3 model refuses the history.
func TestReplayedCallsCarryTheSkipSignature(t *testing.T) {
	var body []byte
	p, _ := rawServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		answerWith(200, nil, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`)(w, r)
	})
	req := llm.Request{Model: "gemini-3-pro", Messages: []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)}, {ID: "b", Name: "g"}}},
		{Role: llm.RoleTool, ToolResults: []llm.ToolResult{{CallID: "a", Name: "f", Content: "1"}, {CallID: "b", Name: "g", Content: "2"}}},
	}}
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Contents []struct {
			Parts []struct {
				ThoughtSignature []byte          `json:"thoughtSignature"`
				FunctionCall     json.RawMessage `json:"functionCall"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	for _, part := range wire.Contents[1].Parts {
		if part.FunctionCall != nil && string(part.ThoughtSignature) != "skip_thought_signature_validator" {
			t.Errorf("a replayed functionCall part carries signature %q", part.ThoughtSignature)
		}
	}
}

// TestMissingCallIDsAreSynthesized: the API may omit a call's id; the
// provider names calls by their position, the same way streamed or not.
func TestMissingCallIDsAreSynthesized(t *testing.T) {
	calls := `{"functionCall":{"name":"read_logs","args":{"service":"checkout","lines":50}}},
{"functionCall":{"name":"read_metrics","args":{}}}`
	p, _ := rawServer(t, answerWith(200, nil,
		`{"candidates":[{"content":{"role":"model","parts":[`+calls+`]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"read_logs","args":{"service":"checkout","lines":50}}}]}}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"read_metrics"}}]},"finishReason":"STOP"}]}`))
	for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
		got, err := p.Complete(context.Background(), hello(), sink)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.ToolCalls) != 2 || got.StopReason != llm.StopToolUse ||
			got.ToolCalls[0].ID != "call_0" || got.ToolCalls[1].ID != "call_1" ||
			!llmtest.SameJSON(got.ToolCalls[0].Arguments, json.RawMessage(`{"lines":50,"service":"checkout"}`)) ||
			string(got.ToolCalls[1].Arguments) != `{}` {
			t.Fatalf("streamed=%v: response = %+v, want calls call_0 and call_1 and stop toolUse", sink != nil, got)
		}
	}
}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		reason string
		stop   llm.StopReason
		kind   llm.Kind
	}{
		{"STOP", llm.StopEnd, ""},
		{"MAX_TOKENS", llm.StopMaxTokens, ""},
		{"OTHER", llm.StopEnd, ""},
		{"SAFETY", "", llm.KindRefused},
		{"RECITATION", "", llm.KindRefused},
		{"PROHIBITED_CONTENT", "", llm.KindRefused},
		{"BLOCKLIST", "", llm.KindRefused},
		{"SPII", "", llm.KindRefused},
		{"MALFORMED_FUNCTION_CALL", "", llm.KindMalformed},
	} {
		chunk := `{"candidates":[{"content":{"role":"model","parts":[{"text":"Some text"}]},"finishReason":"` + tc.reason + `"}]}`
		p, _ := rawServer(t, answerWith(200, nil, chunk, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Some "}]}}]}`, chunk))
		for _, sink := range []func(llm.Delta){nil, func(llm.Delta) {}} {
			got, err := p.Complete(context.Background(), hello(), sink)
			if tc.kind != "" {
				if e := kindOf(t, err); e.Kind != tc.kind || !strings.Contains(e.Message, tc.reason) {
					t.Errorf("%s (streamed=%v) = %+v, want %s naming the reason", tc.reason, sink != nil, e, tc.kind)
				}
				continue
			}
			if err != nil || got.StopReason != tc.stop {
				t.Errorf("%s (streamed=%v) = %+v, %v; want stop %s", tc.reason, sink != nil, got, err, tc.stop)
			}
		}
	}
}

func TestBlockedPromptIsRefused(t *testing.T) {
	p, _ := rawServer(t, answerWith(200, nil, `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[
{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`))
	_, err := p.Complete(context.Background(), hello(), nil)
	if e := kindOf(t, err); e.Kind != llm.KindRefused || !strings.Contains(e.Message, "SAFETY") {
		t.Fatalf("a blocked prompt = %+v, want refused naming the reason", e)
	}
}

func TestAnswerWithoutCandidateIsMalformed(t *testing.T) {
	p, _ := rawServer(t, answerWith(200, nil, `{"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`))
	_, err := p.Complete(context.Background(), hello(), nil)
	if e := kindOf(t, err); e.Kind != llm.KindMalformed {
		t.Fatalf("an answer with no candidate = %+v, want malformed", e)
	}
}

// TestUnsendableRequests are refused before anything is sent.
func TestUnsendableRequests(t *testing.T) {
	for name, req := range map[string]llm.Request{ //loom:order-independent each case on its own
		"no model":       {Messages: []llm.Message{llm.UserText("hi")}},
		"array args":     {Model: "m", Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "f", Arguments: json.RawMessage(`[1]`)}}}}},
		"invalid schema": {Model: "m", Messages: []llm.Message{llm.UserText("hi")}, Tools: []llm.Tool{{Name: "f", InputSchema: json.RawMessage(`{`)}}},
		"unknown role":   {Model: "m", Messages: []llm.Message{{Role: "system", Text: "hi"}}},
	} {
		p, hits := rawServer(t, answerWith(200, nil, `{}`))
		_, err := p.Complete(context.Background(), req, nil)
		if e := kindOf(t, err); e.Kind != llm.KindInvalidRequest {
			t.Errorf("%s: %+v, want invalidRequest", name, e)
		}
		if hits.Load() != 0 {
			t.Errorf("%s: the server got %d requests, want none", name, hits.Load())
		}
	}
}
