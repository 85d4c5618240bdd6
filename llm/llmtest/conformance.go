package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loom-kernel/loom/llm"
)

// APIKey is the credential the kit hands a target: it must reach the fake
// server and never an error message.
const APIKey = "sk-llmtest-SECRET-7f3a9c"

// Target is a provider under test and the fake server it is aimed at.
type Target struct {
	Server   Server
	Provider llm.Provider
	// Normalize maps a sent request to what the API's wire format can carry
	// back (the fields it drops or fills in, such as a tool result's name or
	// a default MaxTokens), so the kit can compare it with what the server
	// decoded. nil is the identity.
	Normalize func(llm.Request) llm.Request
	// NoCacheWrite says the API reports no cache-write tokens.
	NoCacheWrite bool
}

// RunProvider is the provider conformance kit: every provider passes it
// against its fake server. newTarget is called once per subtest with the
// API key the provider must send.
//
// It checks a plain answer with a system prompt, tool definitions and a
// tool-call history round-tripping to the server; several tool calls in one
// turn; structured output; streaming (text and tool-argument fragments in
// order, the final response equal to the non-streamed one); a cancel in the
// middle of a stream; and the failure kinds: 429 with Retry-After, 5xx,
// a malformed body, invalid request, context overflow, refusal — each sent
// exactly once (no hidden retries) and none echoing the API key.
func RunProvider(t *testing.T, newTarget func(t *testing.T, apiKey string) Target) {
	t.Run("Name", func(t *testing.T) {
		if newTarget(t, APIKey).Provider.Name() == "" {
			t.Fatal("Name() is empty")
		}
	})
	t.Run("PlainAnswer", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		want := llm.Response{Model: "model-a", Text: "The deploy at 14:02 broke it.", StopReason: llm.StopEnd,
			Usage: usage(tg, 120, 14)}
		tg.Server.Enqueue(Reply{Response: want})
		req := conversation()
		got, err := tg.Provider.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		sameResponse(t, got, want)
		checkReceived(t, tg, req, false)
	})
	t.Run("ToolCalls", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		want := llm.Response{Model: "model-a", StopReason: llm.StopToolUse, Usage: usage(tg, 200, 40),
			ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "read_logs", Arguments: json.RawMessage(`{"service":"checkout","lines":50}`)},
				{ID: "call_2", Name: "read_metrics", Arguments: json.RawMessage(`{"service":"checkout","window":"15m"}`)},
			}}
		tg.Server.Enqueue(Reply{Response: want})
		got, err := tg.Provider.Complete(context.Background(), conversation(), nil)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		sameResponse(t, got, want)
	})
	t.Run("TextAndToolCall", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		want := llm.Response{Model: "model-a", Text: "Let me look at the logs.", StopReason: llm.StopToolUse,
			Usage:     usage(tg, 90, 12),
			ToolCalls: []llm.ToolCall{{ID: "call_9", Name: "read_logs", Arguments: json.RawMessage(`{"service":"search"}`)}}}
		tg.Server.Enqueue(Reply{Response: want})
		got, err := tg.Provider.Complete(context.Background(), conversation(), nil)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		sameResponse(t, got, want)
	})
	t.Run("StructuredOutput", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		want := llm.Response{Model: "model-a", Text: `{"plan":"rollback","risk":"low"}`, StopReason: llm.StopEnd, Usage: usage(tg, 60, 9)}
		tg.Server.Enqueue(Reply{Response: want})
		req := llm.Request{Model: "model-a", Messages: []llm.Message{llm.UserText("Pick a plan.")}, MaxTokens: 256,
			ResponseFormat: &llm.ResponseFormat{Name: "plan", Schema: json.RawMessage(
				`{"type":"object","properties":{"plan":{"type":"string"},"risk":{"type":"string"}},"required":["plan","risk"],"additionalProperties":false}`)}}
		got, err := tg.Provider.Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		sameResponse(t, got, want)
		checkReceived(t, tg, req, false)
	})
	t.Run("Streaming", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		want := llm.Response{Model: "model-a", Text: "Two things to check first, then a fix.", StopReason: llm.StopToolUse,
			Usage: usage(tg, 150, 33),
			ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "read_logs", Arguments: json.RawMessage(`{"service":"checkout","lines":20}`)},
				{ID: "call_b", Name: "read_metrics", Arguments: json.RawMessage(`{"service":"checkout"}`)},
			}}
		tg.Server.Enqueue(Reply{Response: want})
		var deltas []llm.Delta
		req := conversation()
		got, err := tg.Provider.Complete(context.Background(), req, func(d llm.Delta) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatalf("Complete (streaming): %v", err)
		}
		sameResponse(t, got, want)
		checkReceived(t, tg, req, true)
		checkDeltas(t, deltas, want)
	})
	t.Run("CancelMidStream", func(t *testing.T) {
		tg := newTarget(t, APIKey)
		tg.Server.Enqueue(Reply{Response: llm.Response{Model: "model-a", Text: "This answer never ends", StopReason: llm.StopEnd}, Hang: true})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := tg.Provider.Complete(ctx, conversation(), func(llm.Delta) { cancel() })
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second): // a liveness bound, not a timing assertion
			t.Fatal("Complete did not return after its context was cancelled mid-stream")
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Complete after a cancel mid-stream = %v, want an error matching context.Canceled", err)
		}
	})
	failures := []struct {
		name  string
		reply Reply
		kind  llm.Kind
		retry time.Duration
	}{
		{"RateLimited", Reply{Fail: llm.KindRateLimited, Message: "slow down", RetryAfter: "7"}, llm.KindRateLimited, 7 * time.Second},
		{"Unavailable", Reply{Fail: llm.KindUnavailable, Message: "upstream is down"}, llm.KindUnavailable, 0},
		{"Malformed", Reply{Fail: llm.KindMalformed}, llm.KindMalformed, 0},
		{"InvalidRequest", Reply{Fail: llm.KindInvalidRequest, Message: "messages: field required"}, llm.KindInvalidRequest, 0},
		{"ContextOverflow", Reply{Fail: llm.KindContextOverflow, Message: "prompt is too long: 250000 tokens > 200000 maximum"}, llm.KindContextOverflow, 0},
		{"Refused", Reply{Fail: llm.KindRefused, Message: "I can't help with that."}, llm.KindRefused, 0},
		{"Unauthorized", Reply{Fail: llm.KindUnauthorized, Message: "invalid x-api-key"}, llm.KindUnauthorized, 0},
	}
	for _, f := range failures {
		for _, stream := range []bool{false, true} {
			name := f.name
			if stream {
				name += "/Streaming"
			}
			t.Run(name, func(t *testing.T) {
				tg := newTarget(t, APIKey)
				tg.Server.Enqueue(f.reply)
				var sink func(llm.Delta)
				if stream {
					sink = func(llm.Delta) {}
				}
				_, err := tg.Provider.Complete(context.Background(), conversation(), sink)
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("Complete = %v (%T), want *llm.Error of kind %s", err, err, f.kind)
				}
				if e.Kind != f.kind {
					t.Fatalf("kind = %s, want %s (%v)", e.Kind, f.kind, err)
				}
				if e.Provider != tg.Provider.Name() {
					t.Errorf("Error.Provider = %q, want %q", e.Provider, tg.Provider.Name())
				}
				if e.RetryAfter != f.retry {
					t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, f.retry)
				}
				if f.reply.Message != "" && f.kind != llm.KindRefused && !strings.Contains(e.Message, f.reply.Message) {
					t.Errorf("Message = %q, want it to carry the API's message %q", e.Message, f.reply.Message)
				}
				if strings.Contains(err.Error(), APIKey) || strings.Contains(e.Message, APIKey) {
					t.Error("the error echoes the API key")
				}
				if n := len(tg.Server.Requests()); n != 1 {
					t.Errorf("the server got %d requests, want exactly 1 (a provider never retries on its own)", n)
				}
			})
		}
	}
}

// usage is a usage the target's API can express.
func usage(tg Target, in, out int64) llm.Usage {
	u := llm.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: in / 4}
	if !tg.NoCacheWrite {
		u.CacheWriteTokens = in / 10
	}
	return u
}

// conversation is a request with every part of the SPI: a system prompt,
// tools, and a history with a tool call and its results.
func conversation() llm.Request {
	temp := 0.25
	return llm.Request{
		Model:  "model-a",
		System: "You are the on-call assistant. Be brief.",
		Tools: []llm.Tool{
			{Name: "read_logs", Description: "Read a service's recent log lines.", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"service":{"type":"string"},"lines":{"type":"integer"}},"required":["service"]}`)},
			{Name: "read_metrics", Description: "Read a service's latency and error metrics.", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"service":{"type":"string"},"window":{"type":"string"}},"required":["service"]}`)},
		},
		Messages: []llm.Message{
			llm.UserText("checkout is slow since 14:05"),
			{Role: llm.RoleAssistant, Text: "Checking the logs.", ToolCalls: []llm.ToolCall{
				{ID: "call_0", Name: "read_logs", Arguments: json.RawMessage(`{"service":"checkout"}`)}}},
			{Role: llm.RoleTool, ToolResults: []llm.ToolResult{
				{CallID: "call_0", Name: "read_logs", Content: `{"lines":["pool exhausted","timeout"]}`}}},
			llm.UserText("And the metrics?"),
		},
		MaxTokens:   512,
		Temperature: &temp,
	}
}

func sameResponse(t *testing.T, got, want llm.Response) {
	t.Helper()
	if got.Model != want.Model || got.Text != want.Text || got.StopReason != want.StopReason || got.Usage != want.Usage {
		t.Errorf("response = %+v\nwant       %+v", got, want)
	}
	if len(got.ToolCalls) != len(want.ToolCalls) {
		t.Fatalf("tool calls = %+v, want %+v", got.ToolCalls, want.ToolCalls)
	}
	for i := range want.ToolCalls {
		g, w := got.ToolCalls[i], want.ToolCalls[i]
		if g.ID != w.ID || g.Name != w.Name || !SameJSON(g.Arguments, w.Arguments) {
			t.Errorf("tool call %d = {%s %s %s}, want {%s %s %s}", i, g.ID, g.Name, g.Arguments, w.ID, w.Name, w.Arguments)
		}
	}
}

func checkReceived(t *testing.T, tg Target, sent llm.Request, stream bool) {
	t.Helper()
	rs := tg.Server.Requests()
	if len(rs) != 1 {
		t.Fatalf("the server got %d requests, want 1", len(rs))
	}
	r := rs[0]
	if r.Stream != stream {
		t.Errorf("the request streamed = %v, want %v", r.Stream, stream)
	}
	if r.APIKey != APIKey {
		t.Errorf("the request carried API key %q, want the configured one", r.APIKey)
	}
	want := sent
	if tg.Normalize != nil {
		want = tg.Normalize(sent)
	}
	if !SameRequest(r.Request, want) {
		g, _ := json.MarshalIndent(r.Request, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("the server decoded\n%s\nwant\n%s", g, w)
	}
}

func checkDeltas(t *testing.T, deltas []llm.Delta, want llm.Response) {
	t.Helper()
	var text strings.Builder
	args := map[int]*strings.Builder{}
	ids, names := map[int]string{}, map[int]string{}
	textPieces := 0
	for _, d := range deltas {
		if d.Text != "" {
			text.WriteString(d.Text)
			textPieces++
		}
		if d.ToolID != "" || d.ToolName != "" || d.Arguments != "" {
			if _, seen := args[d.ToolIndex]; !seen {
				args[d.ToolIndex] = &strings.Builder{}
				ids[d.ToolIndex], names[d.ToolIndex] = d.ToolID, d.ToolName
			}
			args[d.ToolIndex].WriteString(d.Arguments)
		}
	}
	if text.String() != want.Text {
		t.Errorf("text deltas = %q, want %q", text.String(), want.Text)
	}
	if textPieces < 2 {
		t.Errorf("the text came in %d delta(s), want it streamed in pieces", textPieces)
	}
	for i, c := range want.ToolCalls {
		b, ok := args[i]
		if !ok {
			t.Errorf("no deltas for tool call %d", i)
			continue
		}
		if ids[i] != c.ID || names[i] != c.Name {
			t.Errorf("tool call %d's first delta names {%s %s}, want {%s %s}", i, ids[i], names[i], c.ID, c.Name)
		}
		if !SameJSON(json.RawMessage(b.String()), c.Arguments) {
			t.Errorf("tool call %d's argument deltas = %s, want %s", i, b.String(), c.Arguments)
		}
	}
}

// SameJSON reports whether a and b are the same JSON value (member order
// and spacing aside).
func SameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(normalNumbers(x), normalNumbers(y))
}

// normalNumbers makes 50 and 50.0 equal.
func normalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case map[string]any:
		for k, e := range x { //loom:order-independent each member on its own
			x[k] = normalNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalNumbers(e)
		}
	}
	return v
}

// SameRequest compares requests with JSON-valued fields (schemas, tool
// arguments) compared as JSON values.
func SameRequest(a, b llm.Request) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && SameJSON(ja, jb)
}
