package wire_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// inboxEnv is a runtime with the given features, a flow that receives two
// messages on "orders" and one that echoes its input, and a client of its
// wire handler (serve).
type inboxEnv struct {
	events *memstore.EventStore
	rt     *loom.Runtime
	cl     *wire.Client
}

func newInboxEnv(t *testing.T, features loom.Features) *inboxEnv {
	t.Helper()
	e := &inboxEnv{events: memstore.NewEventStore()}
	collect := loom.NewFlow("collect", func(c *loom.Context, _ struct{}) ([]int, error) {
		var got []int
		for range 2 {
			v, err := loom.Receive[int](c, "orders")
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		return got, nil
	})
	echo := loom.NewFlow("echo", func(c *loom.Context, n int) (int, error) { return n, nil })
	e.rt, e.cl = serve(t, loom.Config{Events: e.events, Flows: []*loom.Flow{collect, echo}, Features: features,
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	return e
}

// execution.send puts a message in an execution's inbox, and the parked
// flow receives it; a send the kernel refuses is a typed error that sends
// nothing.
func TestSendOverTheWire(t *testing.T) {
	e := newInboxEnv(t, loom.Features{Inbox: true})
	ctx := testCtx(t)
	st, err := e.cl.Start(ctx, wire.StartParams{FlowID: "collect", ExecutionID: "c1", Wait: true})
	if err != nil || st.ExecutionID != "c1" {
		t.Fatalf("start: %+v, %v", st, err)
	}
	for _, v := range []string{"1", "2"} {
		res, err := e.cl.Send(ctx, wire.SendParams{ExecutionID: "c1", Topic: "orders", Payload: json.RawMessage(v)})
		if err != nil || res.ExecutionID != "c1" {
			t.Fatalf("send %s: %+v, %v", v, res, err)
		}
	}
	out, err := e.rt.WaitForCompletion(ctx, "c1")
	if err != nil || string(out.Output) != "[1,2]" {
		t.Fatalf("the flow received %s, %v; want [1,2]", out.Output, err)
	}

	before, _ := store.Read(ctx, e.events, "c1")
	var we *wire.Error
	for name, tc := range map[string]struct {
		p    wire.SendParams
		code int
	}{
		"to an ended execution": {wire.SendParams{ExecutionID: "c1", Topic: "orders", Payload: json.RawMessage(`3`)}, wire.CodeSendRefused},
		"to nobody":             {wire.SendParams{ExecutionID: "nobody", Topic: "orders"}, wire.CodeExecutionNotFound},
		"without a topic":       {wire.SendParams{ExecutionID: "c1"}, wire.CodeInvalidParams},
		"with a bad topic":      {wire.SendParams{ExecutionID: "c1", Topic: "bad\x00topic"}, wire.CodeInvalidInput},
	} { //loom:order-independent each case is separate
		_, err := e.cl.Send(ctx, tc.p)
		if !errors.As(err, &we) || we.Code != tc.code {
			t.Errorf("send %s: %v, want code %d", name, err, tc.code)
		}
	}
	if after, _ := store.Read(ctx, e.events, "c1"); len(after) != len(before) {
		t.Fatalf("a refused send appended: %d -> %d events", len(before), len(after))
	}
	if page, _ := e.events.ListExecutions(ctx, "", 100); len(page.Executions) != 2 { // c1 and its inbox stream
		t.Fatalf("executions after the refusals: %+v", page.Executions)
	}
}

// Without Features.Inbox, execution.send is CodeNotConfigured.
func TestSendOverTheWireNeedsTheInbox(t *testing.T) {
	e := newInboxEnv(t, loom.Features{})
	ctx := testCtx(t)
	var we *wire.Error
	if _, err := e.cl.Send(ctx, wire.SendParams{ExecutionID: "c1", Topic: "orders"}); !errors.As(err, &we) || we.Code != wire.CodeNotConfigured {
		t.Fatalf("send with the inbox off: %v, want CodeNotConfigured", err)
	}
}

// runtime.recover runs one recovery pass and says how many executions it
// re-drove: here an execution a stopped process left running.
func TestRecoverOverTheWire(t *testing.T) {
	e := newInboxEnv(t, loom.Features{Inbox: true})
	ctx := testCtx(t)
	res, err := e.cl.Recover(ctx)
	if err != nil || res.Recovered != 0 {
		t.Fatalf("recover of nothing: %+v, %v", res, err)
	}
	// A start a stopped process wrote and never drove.
	start := event.Envelope{ID: "orphan:0", WorkflowID: "collect", ExecutionID: "orphan", Type: event.ExecutionStarted,
		Sequence: 0, Payload: json.RawMessage(`{"input":null}`)}
	if err := e.events.Append(ctx, "orphan", 0, []event.Envelope{start}); err != nil {
		t.Fatal(err)
	}
	if res, err = e.cl.Recover(ctx); err != nil || res.Recovered != 1 {
		t.Fatalf("recover of a start nobody drove: %+v, %v; want 1 re-driven", res, err)
	}
	if st, err := e.rt.WaitForSuspend(ctx, "orphan"); err != nil || st.Variables.SuspendedOn == nil {
		t.Fatalf("the recovered execution: %v; want it parked on its receive", err)
	}
	var we *wire.Error
	if err := e.cl.Call(ctx, wire.MethodRecover, map[string]any{"all": true}, nil); !errors.As(err, &we) || we.Code != wire.CodeInvalidParams {
		t.Fatalf("recover with an unknown param: %v, want CodeInvalidParams", err)
	}
}

// execution.resumeAs re-opens an ended execution, here with its input
// replaced (EXECUTION_MIGRATED), and drives it again; onto a flow the app
// does not register it is refused and records nothing.
func TestResumeAsOverTheWire(t *testing.T) {
	e := newInboxEnv(t, loom.Features{})
	ctx := testCtx(t)
	if _, err := e.cl.Start(ctx, wire.StartParams{FlowID: "echo", ExecutionID: "e1", Input: json.RawMessage(`3`), Wait: true}); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Read(ctx, e.events, "e1")
	var we *wire.Error
	for name, tc := range map[string]struct {
		p    wire.ResumeAsParams
		code int
	}{
		"onto an unknown flow": {wire.ResumeAsParams{ExecutionID: "e1", FlowID: "nothing"}, wire.CodeUnknownFlow},
		"of nobody":            {wire.ResumeAsParams{ExecutionID: "nobody"}, wire.CodeExecutionNotFound},
		"without an id":        {wire.ResumeAsParams{}, wire.CodeInvalidParams},
	} { //loom:order-independent each case is separate
		if _, err := e.cl.ResumeAs(ctx, tc.p); !errors.As(err, &we) || we.Code != tc.code {
			t.Errorf("resumeAs %s: %v, want code %d", name, err, tc.code)
		}
	}
	if after, _ := store.Read(ctx, e.events, "e1"); len(after) != len(before) {
		t.Fatalf("a refused resumeAs appended: %d -> %d events", len(before), len(after))
	}
	res, err := e.cl.ResumeAs(ctx, wire.ResumeAsParams{ExecutionID: "e1", Input: json.RawMessage(`7`), Wait: true})
	if err != nil || res.ExecutionID != "e1" {
		t.Fatalf("resumeAs: %+v, %v", res, err)
	}
	out, err := e.rt.WaitForCompletion(ctx, "e1")
	if err != nil || string(out.Output) != "7" {
		t.Fatalf("the re-opened execution: %s, %v; want it completed with its new input 7", out.Output, err)
	}
}
