package wire_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

// TestWatchStreamsEachDurableState: execution.watch sends the current
// durable state, then the state after each new event, each equal to
// execution.state at that sequence byte for byte; a Last-Event-ID naming
// the current state skips it; an unknown execution is refused before the
// stream starts.
func TestWatchStreamsEachDurableState(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"w-1","wait":true}}`)
	parked := int64(eventCount(t, e, "w-1") - 1)
	c, err := wire.NewClient(e.srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(testCtx(t), wire.WatchParams{ExecutionID: "w-1"}, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first := <-w.States()
	if first.Sequence != parked {
		t.Fatalf("the first state is at #%d, want the current #%d", first.Sequence, parked)
	}
	if st, err := first.Decode(); err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("the first state: %v, %v", st.Status, err)
	}
	e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":{"executionId":"w-1","eventType":"approve","payload":{"approved":true},"wait":true}}`)
	final := int64(eventCount(t, e, "w-1") - 1)
	last := first
	for last.Sequence < final {
		u, ok := <-w.States()
		if !ok {
			t.Fatalf("the watch ended: %v", w.Err())
		}
		if u.Sequence != last.Sequence+1 {
			t.Fatalf("state #%d after #%d: every durable event is a state", u.Sequence, last.Sequence)
		}
		at := e.rpc(t, `{"jsonrpc":"2.0","id":3,"method":"execution.state","params":{"executionId":"w-1","at":`+itoa(int(u.Sequence))+`}}`)
		want, _ := json.Marshal(result(t, at)["state"])
		if !jsonEqual(t, u.State, want) {
			t.Fatalf("the watched state at #%d differs from execution.state:\n%s\n%s", u.Sequence, u.State, want)
		}
		last = u
	}
	if !strings.Contains(string(last.State), `"status":"completed"`) {
		t.Fatalf("the last watched state is not the completed one: %s", last.State)
	}

	// Resuming a watch that holds the latest state sends nothing until a
	// change; a raw request shows the framing.
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.srv.URL+wire.Path,
		strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"execution.watch","params":{"executionId":"w-1"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if f := readFrames(t, bufio.NewReader(resp.Body), 1); !strings.HasPrefix(f[0], "id: "+itoa(int(last.Sequence))+"\nevent: state\ndata: {") {
		t.Fatalf("the raw frame:\n%s", f[0])
	}

	_, err = c.Watch(testCtx(t), wire.WatchParams{ExecutionID: "nope"}, -1)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeExecutionNotFound {
		t.Fatalf("watch of an unknown execution = %v, want CodeExecutionNotFound", err)
	}
}

// TestWatchFromTheHeldStateSkipsIt: a client holding the current state
// gets only what changes after it.
func TestWatchFromTheHeldStateSkipsIt(t *testing.T) {
	e := newEnv(t, nil)
	e.rpc(t, `{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"order","input":{"item":"x","qty":1},"executionId":"w-2","wait":true}}`)
	parked := int64(eventCount(t, e, "w-2") - 1)
	c, _ := wire.NewClient(e.srv.URL, wire.WithToken(token))
	w, err := c.Watch(testCtx(t), wire.WatchParams{ExecutionID: "w-2"}, parked)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.rpc(t, `{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":{"executionId":"w-2","eventType":"approve","payload":{"approved":true}}}`)
	if u := <-w.States(); u.Sequence != parked+1 {
		t.Fatalf("the first state is #%d, want #%d: the held #%d is not sent again", u.Sequence, parked+1, parked)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
