package wire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// executionIDs lists every execution of the env's store.
func executionIDs(t *testing.T, e *env) []string {
	t.Helper()
	page, err := e.events.ListExecutions(testCtx(t), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range page.Executions {
		ids = append(ids, x.ExecutionID)
	}
	return ids
}

// TestInvalidUTF8RefusedAtTheEdge sends, to every method, params whose text
// is not valid UTF-8 or holds a lone surrogate escape, in an id, an event
// type, a reason, a member name and deep inside a payload: each is refused
// with CodeInvalidParams naming where, and nothing reaches the runtime —
// no execution is created and no event appended. encoding/json used to
// decode them as U+FFFD, so "bad\xff" started under another id.
func TestInvalidUTF8RefusedAtTheEdge(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"u-1","wait":true}}`)
	before := eventCount(t, e, "u-1")
	for _, tc := range []struct {
		name, method, params, location string
	}{
		{"start id", "execution.start", "{\"flowId\":\"order\",\"executionId\":\"bad\xff\"}", "/executionId"},
		{"start id, lone surrogate", "execution.start", `{"flowId":"order","executionId":"bad\udc00"}`, "/executionId"},
		{"start id, high surrogate alone", "execution.start", `{"flowId":"order","executionId":"bad\ud800x"}`, "/executionId"},
		{"start id, reversed pair", "execution.start", `{"flowId":"order","executionId":"bad\ude00\ud83d"}`, "/executionId"},
		{"start flow", "execution.start", "{\"flowId\":\"ord\xc3\"}", "/flowId"},
		{"start input", "execution.start", "{\"flowId\":\"order\",\"executionId\":\"fine\",\"input\":{\"item\":[\"\xed\xa0\x80\"],\"qty\":1}}", "/input/item/0"},
		{"start input, surrogate", "execution.start", `{"flowId":"order","executionId":"fine","input":{"item":"\udfff","qty":1}}`, "/input/item"},
		{"param name", "execution.start", "{\"flowId\":\"order\",\"executionId\xff\":\"fine\"}", ""},
		{"resume id", "execution.resume", "{\"executionId\":\"u-1\xff\",\"eventType\":\"approve\",\"payload\":{\"approved\":true}}", "/executionId"},
		{"resume event type", "execution.resume", "{\"executionId\":\"u-1\",\"eventType\":\"appro\xffve\",\"payload\":{\"approved\":true}}", "/eventType"},
		{"resume payload", "execution.resume", "{\"executionId\":\"u-1\",\"eventType\":\"approve\",\"payload\":{\"approved\":true,\"note\":\"\xff\"}}", "/payload/note"},
		{"resume payload key", "execution.resume", `{"executionId":"u-1","eventType":"approve","payload":{"approved":true,"\udc00":1}}`, ""},
		{"resume credentials", "execution.resume", `{"executionId":"u-1","eventType":"approve","payload":{"approved":true},"credentials":{"key":"\udc00"}}`, "/credentials"},
		{"cancel id", "execution.cancel", "{\"executionId\":\"u-1\xfe\"}", "/executionId"},
		{"cancel reason", "execution.cancel", "{\"executionId\":\"u-1\",\"reason\":\"\xc0\xaf\"}", "/reason"},
		{"fork id", "execution.fork", "{\"executionId\":\"u-1\",\"at\":1,\"forkId\":\"f\xff\"}", "/forkId"},
		{"state id", "execution.state", `{"executionId":"u-\udc001"}`, "/executionId"},
		{"events id", "execution.events", "{\"executionId\":\"u-1\x80\"}", "/executionId"},
		{"subscribe id", "execution.subscribe", "{\"executionId\":\"u-1\xff\"}", "/executionId"},
	} {
		resp := e.rpc(t, `{"jsonrpc":"2.0","id":"r-7","method":"`+tc.method+`","params":`+tc.params+`}`)
		if got := errCode(t, resp); got != wire.CodeInvalidParams {
			t.Errorf("%s: code %d, want CodeInvalidParams: %v", tc.name, got, resp)
			continue
		}
		if resp["id"] != "r-7" {
			t.Errorf("%s: the refusal lost the id: %v", tc.name, resp["id"])
		}
		werr := resp["error"].(map[string]any)
		msg := werr["message"].(string)
		if !strings.Contains(msg, "UTF-8") || !strings.Contains(msg, "nothing was run") {
			t.Errorf("%s: the message does not say what was wrong and what to do: %q", tc.name, msg)
		}
		if tc.location != "" {
			if d, _ := werr["data"].(map[string]any); d["location"] != tc.location {
				t.Errorf("%s: data %v, want location %q", tc.name, werr["data"], tc.location)
			}
		}
		if strings.Contains(msg, "\ufffd") {
			t.Errorf("%s: the message quotes the refused text: %q", tc.name, msg)
		}
	}
	if ids := executionIDs(t, e); !slices.Equal(ids, []string{"u-1"}) {
		t.Fatalf("refused requests created executions: %q", ids)
	}
	if n := eventCount(t, e, "u-1"); n != before {
		t.Fatalf("refused requests appended events to u-1: %d → %d", before, n)
	}
}

// TestDistinctIDsNeverCollide: "a\ufffd" (a valid id holding U+FFFD) and
// the invalid "a\xff" and "a\udc00" are three ids, not one; the latter two
// are refused rather than taken for the first (which would have answered
// ErrExecutionExists, or resumed the wrong execution).
func TestDistinctIDsNeverCollide(t *testing.T) {
	e := newEnv(t, nil)
	r := result(t, e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"a\ufffd","wait":true}}`))
	if r["executionId"] != "a\ufffd" {
		t.Fatalf("start of a\\ufffd: %v", r)
	}
	parked := eventCount(t, e, "a\ufffd")
	for _, id := range []string{"\"a\xff\"", `"a\udc00"`, `"a\udfff"`} {
		resp := e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":`+id+`}}`)
		if errCode(t, resp) != wire.CodeInvalidParams {
			t.Errorf("start of %q: %v, want CodeInvalidParams", id, resp)
		}
		resp = e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.resume","params":{"executionId":`+id+`,"eventType":"approve","payload":{"approved":true}}}`)
		if errCode(t, resp) != wire.CodeInvalidParams {
			t.Errorf("resume of %q: %v, want CodeInvalidParams", id, resp)
		}
	}
	if n := eventCount(t, e, "a\ufffd"); n != parked {
		t.Fatalf("a resume under another id reached a\\ufffd: %d → %d events", parked, n)
	}
	if ids := executionIDs(t, e); !slices.Equal(ids, []string{"a\ufffd"}) {
		t.Fatalf("executions %q", ids)
	}
}

// TestRequestNamesExact: the request object's members and params are
// matched by exact name and given once, as every other language's client
// sends them (encoding/json matched "Method" and "ExecutionId"
// case-insensitively); valid requests are accepted as before — escapes in
// names, surrogate pairs, whitespace, and repeated names inside an opaque
// payload.
func TestRequestNamesExact(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"Method", `{"jsonrpc":"2.0","id":1,"Method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"JSONRPC", `{"JSONRPC":"2.0","id":1,"method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"ID", `{"jsonrpc":"2.0","ID":1,"method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"Params", `{"jsonrpc":"2.0","id":1,"method":"execution.state","Params":{"executionId":"x"}}`, wire.CodeInvalidRequest},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"execution.explode","method":"loom.handshake"}`, wire.CodeInvalidRequest},
		{"ExecutionId", `{"jsonrpc":"2.0","id":1,"method":"execution.state","params":{"ExecutionId":"x"}}`, wire.CodeInvalidParams},
		{"FlowID", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"FlowID":"order"}}`, wire.CodeInvalidParams},
		{"executionid", `{"jsonrpc":"2.0","id":1,"method":"execution.events","params":{"executionid":"x"}}`, wire.CodeInvalidParams},
		{"param twice", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","executionId":"d-1","executionId":"d-2"}}`, wire.CodeInvalidParams},
		{"wrong type", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","wait":"yes"}}`, wire.CodeInvalidParams},
		{"int64 overflow", `{"jsonrpc":"2.0","id":1,"method":"execution.state","params":{"executionId":"x","at":9223372036854775808}}`, wire.CodeInvalidParams},
	} {
		resp := e.rpc(t, tc.body)
		if got := errCode(t, resp); got != tc.code {
			t.Errorf("%s: code %d, want %d: %v", tc.name, got, tc.code, resp)
		}
	}
	if ids := executionIDs(t, e); len(ids) != 0 {
		t.Fatalf("refused requests created executions: %q", ids)
	}

	for _, tc := range []struct{ name, body, id string }{
		{"escaped names", `{"\u006asonrpc":"2\u002e0","id":1,"method":"execution.start","params":{"flow\u0049d":"order","input":{"item":"x","qty":1},"executionId":"v-1"}}`, "v-1"},
		{"surrogate pair", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"\ud83c\udf75","qty":1},"executionId":"v-\ud83d\ude00"}}`, "v-😀"},
		{"pretty", "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"execution.start\",\n  \"params\": {\n    \"flowId\": \"order\",\n    \"input\": {\"item\": \"x\", \"qty\": 1},\n    \"executionId\": \"v-3\"\n  }\n}\n", "v-3"},
		{"names repeat inside the input", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1,"qty":2},"executionId":"v-4"}}`, "v-4"},
		{"nulls", `{"jsonrpc":"2.0","id":null,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"v-5","wait":null}}`, "v-5"},
		{"U+FFFD itself", `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"\ufffd","qty":1},"executionId":"v-6"}}`, "v-6"},
	} {
		resp := e.rpc(t, tc.body)
		if _, failed := resp["error"]; failed {
			t.Errorf("%s: a valid request was refused: %v", tc.name, resp["error"])
			continue
		}
		if got := result(t, resp)["executionId"]; got != tc.id {
			t.Errorf("%s: started %v, want %q", tc.name, got, tc.id)
		}
	}
}

// TestResponsesAreValidJSON posts malformed requests — ids that are not
// JSON-RPC ids or not UTF-8, bad bytes in every member, broken batches —
// and checks that every response the handler writes is valid JSON in valid
// UTF-8 and a proper JSON-RPC 2.0 error object. A raw "\xff" id used to be
// echoed back raw, so the response was not JSON.
func TestResponsesAreValidJSON(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, body string
		id         string // the id the error must carry, as JSON
	}{
		{"raw invalid UTF-8 id", "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"loom.handshake\"}", "null"},
		{"truncated UTF-8 id", "{\"jsonrpc\":\"2.0\",\"id\":\"ab\xe2\x82\",\"method\":\"loom.handshake\"}", "null"},
		{"lone surrogate id", `{"jsonrpc":"2.0","id":"\udc00","method":"loom.handshake"}`, "null"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"loom.handshake"}`, "null"},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"loom.handshake"}`, "null"},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"loom.handshake"}`, "null"},
		{"bad id and bad params", "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"execution.state\",\"params\":{\"executionId\":\"\xff\"}}", "null"},
		{"id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"loom.handshake"}`, "null"},
		{"invalid UTF-8 method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"loom.hand\xffshake\"}", "1"},
		{"surrogate method", `{"jsonrpc":"2.0","id":1,"method":"loom.handshake\udc00"}`, "1"},
		{"invalid UTF-8 jsonrpc", "{\"jsonrpc\":\"2.0\xff\",\"id\":1,\"method\":\"loom.handshake\"}", "1"},
		{"invalid UTF-8 member name", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"loom.handshake\",\"x\xff\":1}", "1"},
		{"invalid UTF-8 params", "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"execution.state\",\"params\":{\"executionId\":\"\xff\"}}", `"q"`},
		{"invalid UTF-8 deep in a payload", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"execution.resume\",\"params\":{\"executionId\":\"x\",\"eventType\":\"e\",\"payload\":[[{\"\xff\":[\"\xff\"]}]]}}", "2"},
		{"not JSON, with bad bytes", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff", "null"},
		{"bad bytes outside strings", "{\"jsonrpc\":\"2.0\",\"id\":1\xff}", "null"},
		{"a bare invalid string", "\"\xff\"", "null"},
		{"a number", `42`, "null"},
		{"null", `null`, "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, "1"},
		{"unknown method quoted back", `{"jsonrpc":"2.0","id":1,"method":"</script>\u2028\"x"}`, "1"},
	} {
		status, out := e.post(t, tc.body)
		if status != http.StatusOK {
			t.Errorf("%s: HTTP %d %q", tc.name, status, out)
			continue
		}
		checkErrorResponse(t, tc.name, []byte(out), tc.id)
	}

	batches := []string{
		"[{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"loom.handshake\"},{\"jsonrpc\":\"2.0\",\"id\":\"\\udc00\",\"method\":\"loom.handshake\"},{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"execution.state\",\"params\":{\"executionId\":\"\xff\"}}]",
		"[1,\"\xff\",null,[],{}]",
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"Method\":\"loom.handshake\"}, {\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"x\"}]",
		"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"loom.handshake\"",
		"[\xff]",
	}
	for i, body := range batches {
		status, out := e.post(t, body)
		if status != http.StatusOK || !utf8.ValidString(out) || !json.Valid([]byte(out)) {
			t.Errorf("batch %d: HTTP %d, not valid JSON in UTF-8: %q", i, status, out)
			continue
		}
		var elems []json.RawMessage
		if err := json.Unmarshal([]byte(out), &elems); err != nil {
			checkErrorResponse(t, "batch", []byte(out), "null") // a refusal of the whole batch
			continue
		}
		for _, el := range elems {
			checkErrorResponse(t, "batch element", el, "")
		}
	}
	if ids := executionIDs(t, e); len(ids) != 0 {
		t.Fatalf("malformed requests created executions: %q", ids)
	}
}

// checkErrorResponse fails unless b is valid JSON in UTF-8 holding exactly
// a JSON-RPC 2.0 error response: jsonrpc "2.0", an id (wantID, when set),
// and an error with an integer code and a message.
func checkErrorResponse(t *testing.T, name string, b []byte, wantID string) {
	t.Helper()
	b = bytes.TrimSpace(b)
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Errorf("%s: the response is not valid JSON in UTF-8: %q", name, b)
		return
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Errorf("%s: not a JSON object: %s", name, b)
		return
	}
	keys := make([]string, 0, len(resp))
	for k := range resp { //loom:sorted sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"error", "id", "jsonrpc"}) || string(resp["jsonrpc"]) != `"2.0"` {
		t.Errorf("%s: not a JSON-RPC 2.0 error response: %s", name, b)
		return
	}
	if wantID != "" && string(resp["id"]) != wantID {
		t.Errorf("%s: id %s, want %s", name, resp["id"], wantID)
	}
	var werr struct {
		Code    *int            `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(resp["error"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&werr); err != nil || werr.Code == nil || werr.Message == "" {
		t.Errorf("%s: not a JSON-RPC error object: %s (%v)", name, resp["error"], err)
		return
	}
	if len(werr.Data) > 0 && werr.Data[0] != '{' {
		t.Errorf("%s: data is not an object: %s", name, werr.Data)
	}
}

// corruptStore serves the log of a memstore with every payload replaced by
// bytes that are not UTF-8, as a store that failed to refuse them would.
type corruptStore struct{ *memstore.EventStore }

func corrupt(evs []event.Envelope) []event.Envelope {
	for i := range evs {
		evs[i].Payload = json.RawMessage("\"\xff\"")
	}
	return evs
}

func (c corruptStore) ReadFrom(ctx context.Context, id string, from int64) ([]event.Envelope, error) {
	evs, err := c.EventStore.ReadFrom(ctx, id, from)
	return corrupt(evs), err
}

func (c corruptStore) ReadRange(ctx context.Context, id string, from, to int64) ([]event.Envelope, error) {
	evs, err := c.EventStore.ReadRange(ctx, id, from, to)
	return corrupt(evs), err
}

// Subscribe delivers the corrupted catch-up, then waits for its end.
func (c corruptStore) Subscribe(ctx context.Context, id string, from int64) (*store.Subscription, error) {
	never := make(chan struct{})
	read := func(ctx context.Context, from int64) ([]event.Envelope, error) { return c.ReadFrom(ctx, id, from) }
	return store.Follow(ctx, read, func() <-chan struct{} { return never }, from), nil
}

// TestStoredBytesNeverBreakTheJSON: a log whose payloads are not UTF-8 is
// answered with an internal error, never with invalid JSON, by
// execution.events and by the execution.subscribe stream (which ends with
// an error event instead of the bad frame).
func TestStoredBytesNeverBreakTheJSON(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"c-1","wait":true}}`)
	h, err := wire.Handler(e.rt, wire.Options{Events: corruptStore{e.events}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	// A short deadline: were a bad frame sent, the stream would stay open.
	call := func(body string) []byte {
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, wire.Path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Body.Bytes()
	}
	body := call(`{"jsonrpc":"2.0","id":2,"method":"execution.events","params":{"executionId":"c-1"}}`)
	checkErrorResponse(t, "events", body, "2")
	if !strings.Contains(string(body), "-32603") {
		t.Fatalf("events of a corrupt log: %s", body)
	}
	batch := call(`[{"jsonrpc":"2.0","id":3,"method":"execution.events","params":{"executionId":"c-1"}},{"jsonrpc":"2.0","id":4,"method":"loom.handshake"}]`)
	var elems []json.RawMessage
	if err := json.Unmarshal(batch, &elems); err != nil || len(elems) != 2 {
		t.Fatalf("batch: %q (%v)", batch, err)
	}
	checkErrorResponse(t, "batch events", elems[0], "3")
	if !strings.Contains(string(elems[1]), `"wireAbiVersion"`) {
		t.Fatalf("the good response of the batch was lost: %s", elems[1])
	}

	stream := call(`{"jsonrpc":"2.0","id":5,"method":"execution.subscribe","params":{"executionId":"c-1"}}`)
	if !utf8.Valid(stream) {
		t.Fatalf("the stream is not UTF-8: %q", stream)
	}
	var sawError bool
	for line := range strings.SplitSeq(string(stream), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if !json.Valid([]byte(data)) {
			t.Fatalf("a data line is not JSON: %q", data)
		}
		if strings.Contains(data, `"code":-32603`) {
			sawError = true
		}
	}
	if !sawError || strings.Contains(string(stream), "event: envelope") {
		t.Fatalf("the stream of a corrupt log did not end with an internal error:\n%s", stream)
	}
}

// countingTransport counts the requests that reach the network.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestClientRefusesInvalidUTF8: the Client never sends invalid UTF-8 (nor
// a lone surrogate escape in a raw JSON value): encoding/json would have
// sent "bad\xff" as "bad\ufffd", another id. Nothing reaches the server.
func TestClientRefusesInvalidUTF8(t *testing.T) {
	e := newEnv(t, nil)
	tr := &countingTransport{}
	c, err := wire.NewClient(e.srv.URL, wire.WithToken(token), wire.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	at := int64(0)
	for name, call := range map[string]func() error{
		"start id": func() error {
			_, err := c.Start(ctx, wire.StartParams{FlowID: "order", ExecutionID: "bad\xff"})
			return err
		},
		"start input": func() error {
			_, err := c.Start(ctx, wire.StartParams{FlowID: "order", Input: json.RawMessage(`{"item":"\udc00","qty":1}`)})
			return err
		},
		"resume payload": func() error {
			_, err := c.Resume(ctx, wire.ResumeParams{ExecutionID: "x", EventType: "approve", Payload: json.RawMessage("\"\xff\"")})
			return err
		},
		"resume credentials": func() error {
			_, err := c.Resume(ctx, wire.ResumeParams{ExecutionID: "x", EventType: "approve", Credentials: json.RawMessage(`"\ud800"`)})
			return err
		},
		"cancel reason": func() error {
			_, err := c.Cancel(ctx, wire.CancelParams{ExecutionID: "x", Reason: "r\xc3"})
			return err
		},
		"fork id": func() error {
			_, err := c.Fork(ctx, wire.ForkParams{ExecutionID: "x", At: &at, ForkID: "f\xff"})
			return err
		},
		"state id": func() error {
			_, err := c.State(ctx, wire.StateParams{ExecutionID: "\xff"})
			return err
		},
		"subscribe id": func() error {
			s, err := c.Subscribe(ctx, wire.SubscribeParams{ExecutionID: "s\xff"})
			if s != nil {
				s.Close()
			}
			return err
		},
		"a generic call": func() error { return c.Call(ctx, wire.MethodEvents, map[string]string{"executionId": "\xff"}, nil) },
	} { //loom:order-independent each case is checked on its own
		if err := call(); !errors.Is(err, wire.ErrInvalidUTF8) || !strings.Contains(err.Error(), "nothing was sent") {
			t.Errorf("%s: %v, want ErrInvalidUTF8", name, err)
		}
	}
	if n := tr.n.Load(); n != 0 {
		t.Fatalf("%d requests holding invalid UTF-8 were sent", n)
	}
	if ids := executionIDs(t, e); len(ids) != 0 {
		t.Fatalf("executions %q", ids)
	}
	if _, err := c.Start(ctx, wire.StartParams{FlowID: "order", ExecutionID: "ok-\ufffd", Input: json.RawMessage(`{"item":"\ud83c\udf75","qty":1}`)}); err != nil {
		t.Fatalf("a valid start: %v", err)
	}
	if _, err := c.Start(ctx, wire.StartParams{FlowID: "order", Input: json.RawMessage(`{bad`)}); err == nil || errors.Is(err, wire.ErrInvalidUTF8) {
		t.Fatalf("input that is not JSON: %v, want an encoding error other than ErrInvalidUTF8", err)
	}
}
