package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/wire"
)

// TestClientAgainstServer runs every Client method against a real server.
func TestClientAgainstServer(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testCtx(t)
	c, err := wire.NewClient(e.srv.URL, wire.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Handshake(ctx)
	if err != nil || h.WireABIVersion != wire.Version || h.KernelABIVersion != loom.KernelABIVersion {
		t.Fatalf("handshake %+v, %v", h, err)
	}

	started, err := c.Start(ctx, wire.StartParams{FlowID: "order", Input: json.RawMessage(`{"item":"tea","qty":2}`), ExecutionID: "c-1", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := fold.Decode(started.State)
	if err != nil || st.Status != fold.StatusSuspended {
		t.Fatalf("start: %v %v", st.Status, err)
	}
	if _, err := c.Start(ctx, wire.StartParams{FlowID: "order", ExecutionID: "c-1"}); !errors.Is(err, loom.ErrExecutionExists) {
		t.Fatalf("duplicate start: %v", err)
	}
	if _, err := c.Start(ctx, wire.StartParams{FlowID: "nope"}); !errors.Is(err, loom.ErrUnknownFlow) {
		t.Fatalf("unknown flow: %v", err)
	}
	if _, err := c.State(ctx, wire.StateParams{ExecutionID: "nope"}); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("unknown execution: %v", err)
	}
	if _, err := c.State(ctx, wire.StateParams{ExecutionID: "bad\x00id"}); !errors.Is(err, event.ErrInvalidEnvelope) {
		t.Fatalf("a NUL in an id: %v", err)
	}
	_, err = c.Resume(ctx, wire.ResumeParams{ExecutionID: "c-1", EventType: "approve", Payload: json.RawMessage(`{"approved":1}`)})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodePayloadInvalid {
		t.Fatalf("off-schema resume: %v", err)
	}
	_, err = c.Resume(ctx, wire.ResumeParams{ExecutionID: "c-1", EventType: "nope"})
	if !errors.As(err, &we) || we.Code != wire.CodeGateMismatch || we.Reason() != string(loom.RefusedGateMismatch) {
		t.Fatalf("gate mismatch: %v (reason %q)", err, we.Reason())
	}

	sub, err := c.Subscribe(ctx, wire.SubscribeParams{ExecutionID: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := c.Resume(ctx, wire.ResumeParams{ExecutionID: "c-1", EventType: "approve", Payload: json.RawMessage(`{"approved":true}`)}); err != nil {
		t.Fatal(err)
	}
	var seen []event.Envelope
	for ev := range sub.Events() {
		if ev.Sequence != int64(len(seen)) {
			t.Fatalf("event #%d delivered at position %d", ev.Sequence, len(seen))
		}
		seen = append(seen, ev)
		if ev.Type == event.ExecutionCompleted {
			break
		}
	}
	page, err := c.Events(ctx, wire.EventsParams{ExecutionID: "c-1", Limit: wire.MaxEventsPage})
	if err != nil || len(page.Events) != len(seen) || page.Next != nil {
		t.Fatalf("events page: %d events (subscribed %d), next %v, %v", len(page.Events), len(seen), page.Next, err)
	}
	for i := range seen {
		a, _ := event.Encode(seen[i])
		b, _ := event.Encode(page.Events[i])
		if string(a) != string(b) {
			t.Fatalf("event %d differs between the stream and the page:\n%s\n%s", i, a, b)
		}
	}

	at := int64(1)
	sr, err := c.State(ctx, wire.StateParams{ExecutionID: "c-1", At: &at})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := sr.Decode(); err != nil || s.Sequence != 1 {
		t.Fatalf("state at 1: %v, %v", s.Sequence, err)
	}
	f, err := c.Fork(ctx, wire.ForkParams{ExecutionID: "c-1", At: &at, ForkID: "c-1-f"})
	if err != nil || f.ExecutionID != "c-1-f" {
		t.Fatalf("fork: %+v %v", f, err)
	}
	// The fork of a running prefix is driven at once; it parks at the gate.
	if _, err := c.Cancel(ctx, wire.CancelParams{ExecutionID: "c-1-f", Reason: "not needed"}); err != nil {
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeTerminal {
			t.Fatal(err)
		}
	}
	if _, err := c.Cancel(ctx, wire.CancelParams{ExecutionID: "c-1"}); !errors.As(err, &we) || we.Code != wire.CodeTerminal {
		t.Fatalf("cancel of a completed execution: %v", err)
	}

	bad, _ := wire.NewClient(e.srv.URL, wire.WithToken("wrong"))
	if _, err := bad.Handshake(ctx); !errors.As(err, &we) || we.Code != wire.CodeUnauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := bad.Subscribe(ctx, wire.SubscribeParams{ExecutionID: "c-1"}); !errors.As(err, &we) || we.Code != wire.CodeUnauthenticated {
		t.Fatalf("wrong token on subscribe: %v", err)
	}
}

// TestClientWaitTimeout: a wait that outlasts the server's timeout returns
// the id without a state, and the execution goes on.
func TestClientWaitTimeout(t *testing.T) {
	e := newEnv(t, func(o *wire.Options) { o.Timeout = 100 * 1e6 })
	c, _ := wire.NewClient(e.srv.URL, wire.WithToken(token))
	ctx := testCtx(t)
	r, err := c.Start(ctx, wire.StartParams{FlowID: "blocker", ExecutionID: "b-1", Wait: true})
	if err != nil || r.ExecutionID != "b-1" || r.State != nil {
		t.Fatalf("start with a wait past the timeout: %+v %v", r, err)
	}
	var we *wire.Error
	if _, err := c.Resume(ctx, wire.ResumeParams{ExecutionID: "b-1", EventType: "go"}); !errors.As(err, &we) || we.Code != wire.CodeNotSuspended {
		t.Fatalf("resume of a running execution: %v", err)
	}
	close(e.release)
	if _, err := e.rt.WaitForCompletion(ctx, "b-1"); err != nil {
		t.Fatal(err)
	}
}

func TestNewClientAddresses(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7070":            "http://127.0.0.1:7070/rpc",
		"http://127.0.0.1:7070":     "http://127.0.0.1:7070/rpc",
		"https://ops.example/x/rpc": "https://ops.example/x/rpc",
	} {
		c, err := wire.NewClient(addr)
		if err != nil || c.Endpoint() != want {
			t.Errorf("%s: %v %v", addr, c, err)
		}
	}
	for _, addr := range []string{"", "ftp://x", "http://"} {
		if _, err := wire.NewClient(addr); err == nil {
			t.Errorf("%q accepted", addr)
		}
	}
	_ = context.Background
}
