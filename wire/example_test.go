package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/projection"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// An app mounts the wire ABI over its runtime with one call; any HTTP
// client then drives executions with JSON-RPC 2.0.
func ExampleHandler() {
	flow := loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		ok, err := loom.Suspend[bool](ctx, "confirm")
		if err != nil || !ok {
			return "", err
		}
		return "hello " + name, nil
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	h, err := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", "ops")})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	call := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+wire.Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var out struct {
			Result struct {
				ExecutionID string `json:"executionId"`
				State       struct {
					Status string `json:"status"`
				} `json:"state"`
			} `json:"result"`
			Error *wire.Error `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if out.Error != nil {
			return fmt.Sprint("error ", out.Error.Code)
		}
		return out.Result.ExecutionID + " " + out.Result.State.Status
	}
	fmt.Println(call(`{"jsonrpc":"2.0","id":1,"method":"execution.start","params":{"flowId":"greet","input":"ada","executionId":"g-1","wait":true}}`))
	fmt.Println(call(`{"jsonrpc":"2.0","id":2,"method":"execution.resume","params":{"executionId":"g-1","eventType":"EXECUTION_COMPLETED"}}`))
	fmt.Println(call(`{"jsonrpc":"2.0","id":3,"method":"execution.resume","params":{"executionId":"g-1","eventType":"confirm","payload":true,"wait":true}}`))
	// Output:
	// g-1 suspended
	// error -32011
	// g-1 completed
}

// The Client calls each method with typed params; errors match the kernel's
// sentinels, and Subscribe follows a log as it grows.
func ExampleClient() {
	flow := loom.NewFlow("count", func(ctx *loom.Context, n int) (int, error) {
		return loom.Suspend[int](ctx, "add")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	h, _ := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", "ops")})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()

	c, _ := wire.NewClient(srv.URL, wire.WithToken("t0ken"))
	hs, _ := c.Handshake(ctx)
	fmt.Println("wire ABI", hs.WireABIVersion)
	r, _ := c.Start(ctx, wire.StartParams{FlowID: "count", Input: json.RawMessage("1"), ExecutionID: "c-1", Wait: true})
	sub, _ := c.Subscribe(ctx, wire.SubscribeParams{ExecutionID: r.ExecutionID})
	defer sub.Close()
	_, _ = c.Resume(ctx, wire.ResumeParams{ExecutionID: "c-1", EventType: "add", Payload: json.RawMessage("41")})
	for e := range sub.Events() {
		fmt.Println(e.Sequence, e.Type)
		if e.Type == event.ExecutionCompleted {
			break
		}
	}
	_, err := c.State(ctx, wire.StateParams{ExecutionID: "nope"})
	fmt.Println(errors.Is(err, loom.ErrExecutionNotFound))
	// Output:
	// wire ABI 1.6.0
	// 0 EXECUTION_STARTED
	// 1 EXECUTION_SUSPENDED
	// 2 EXECUTION_RESUMED
	// 3 EXECUTION_COMPLETED
	// true
}

// Listen binds loopback unless told otherwise; Serve stops with its context.
func ExampleListen() {
	ln, err := wire.Listen(":0")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.HasPrefix(ln.Addr().String(), "127.0.0.1:"))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wire.Serve(ctx, ln, http.NotFoundHandler()) }()
	stop()
	fmt.Println(<-done)

	_, err = wire.Listen("0.0.0.0:7070")
	fmt.Println(errors.Is(err, wire.ErrNotLoopback))
	// Output:
	// true
	// <nil>
	// true
}

// BearerToken admits the requests that carry the token, as one principal.
func ExampleBearerToken() {
	auth := wire.BearerToken("t0ken", map[string]string{"user": "ops"})
	req := httptest.NewRequest(http.MethodPost, wire.Path, nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	p, err := auth(req)
	fmt.Println(p, err)
	req.Header.Set("Authorization", "Bearer guess")
	_, err = auth(req)
	fmt.Println(err)
	// Output:
	// map[user:ops] <nil>
	// wire: unauthenticated
}

// PrincipalFrom lets the app's ResumeAuthenticator record the caller the
// wire authenticated as the one who answered a gate (APPROVAL_GRANTED).
func ExamplePrincipalFrom() {
	flow := loom.NewFlow("ship", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Suspend[bool](ctx, "approve")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}, ResumeAuthenticator: wirePrincipal{}})
	defer rt.Close()
	h, _ := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", map[string]string{"user": "ann"})})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()

	c, _ := wire.NewClient(srv.URL, wire.WithToken("t0ken"))
	_, _ = c.Start(ctx, wire.StartParams{FlowID: "ship", ExecutionID: "s-1", Wait: true})
	r, _ := c.Resume(ctx, wire.ResumeParams{ExecutionID: "s-1", EventType: "approve", Payload: json.RawMessage("true"), Wait: true})
	st, _ := wire.StateResult{State: r.State}.Decode()
	a := st.Variables.Approvals[0]
	fmt.Println(a.Gate, string(a.Principal))
	// Output:
	// approve {"user":"ann"}
}

// wirePrincipal records the wire's principal as the approver.
type wirePrincipal struct{}

func (wirePrincipal) Authenticate(ctx context.Context, _ string, _ loom.ResumeEvent) (json.RawMessage, error) {
	return json.Marshal(wire.PrincipalFrom(ctx))
}

// Watch is a live query of an execution's state: the current durable state
// first, then the state after each new event.
func ExampleClient_Watch() {
	flow := loom.NewFlow("count", func(ctx *loom.Context, n int) (int, error) {
		return loom.Suspend[int](ctx, "add")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	h, _ := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", "ops")})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()

	c, _ := wire.NewClient(srv.URL, wire.WithToken("t0ken"))
	_, _ = c.Start(ctx, wire.StartParams{FlowID: "count", Input: json.RawMessage("1"), ExecutionID: "w-1", Wait: true})
	w, err := c.Watch(ctx, wire.WatchParams{ExecutionID: "w-1"}, -1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	_, _ = c.Resume(ctx, wire.ResumeParams{ExecutionID: "w-1", EventType: "add", Payload: json.RawMessage("41")})
	for u := range w.States() {
		st, _ := u.Decode()
		fmt.Println(u.Sequence, st.Status)
		if st.Status.Terminal() {
			break
		}
	}
	// Output:
	// 1 suspended
	// 2 running
	// 3 completed
}

// A server that serves the app's read models answers readmodel.query with
// a page and its digest; readmodel.watch, holding that digest, sends the
// page again only once a projection changed it.
func ExampleClient_WatchReadModels() {
	ctx := context.Background()
	events, models := memstore.NewEventStore(), memstore.NewReadModelStore()
	flow := loom.NewFlow("order", func(c *loom.Context, item string) (string, error) {
		return "ok", c.Emit("order.placed", map[string]string{"item": item})
	})
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	orders, _ := projection.New(events, models, projection.Projection{Name: "orders",
		Handle: func(tx *projection.Tx, e event.Envelope) error {
			if e.Type == "order.placed" {
				tx.Put(store.ReadModel{Kind: "order", ID: e.ExecutionID, Doc: e.Payload})
			}
			return nil
		}})
	h, _ := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", "ops"),
		ReadModels: models, ReadModelChanges: orders})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, _ := wire.NewClient(srv.URL, wire.WithToken("t0ken"))

	q := wire.ReadModelQueryParams{Kind: "order"}
	page, err := c.QueryReadModels(ctx, q)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(page.Rows), "orders")
	w, err := c.WatchReadModels(ctx, q, page.Digest)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	_, _ = rt.Start(ctx, "order", "tea", loom.WithExecutionID("o-1"))
	_, _ = rt.WaitForCompletion(ctx, "o-1")
	_, _ = orders.CatchUpExecution(ctx, "o-1")
	next := <-w.Pages()
	fmt.Println(len(next.Page.Rows), "order:", next.Page.Rows[0].ID, string(next.Page.Rows[0].Doc))
	// Output:
	// 0 orders
	// 1 order: o-1 {"item":"tea"}
}
