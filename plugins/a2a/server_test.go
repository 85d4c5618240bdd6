package a2a_test

import (
	"context"
	"errors"
	"testing"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/loom-kernel/loom"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store/memstore"
)

func TestServerPublishesAgentCards(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	for base, want := range map[string]string{p.url: "echo", p.url + "/agents/echo": "echo", p.url + "/agents/approver": "approver"} {
		card, err := agentcard.DefaultResolver.Resolve(ctx, base)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if card.Name != want || len(card.SupportedInterfaces) != 1 ||
			card.SupportedInterfaces[0].URL != p.url+"/agents/"+want ||
			card.SupportedInterfaces[0].ProtocolBinding != protocol.TransportProtocolJSONRPC {
			t.Fatalf("%s: card %+v", base, card)
		}
		if _, ok := card.SecuritySchemes["bearer"]; !ok {
			t.Fatalf("%s: the card names no bearer scheme: %+v", base, card.SecuritySchemes)
		}
	}
}

func TestSendCompletes(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	c := sdkClient(t, p.url+"/agents/echo", "alice-token")
	task, err := sendText(ctx, c, "", protocol.NewTextPart("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != protocol.TaskStateCompleted || artifactText(task) != "echo: hi" || task.ContextID == "" {
		t.Fatalf("task %+v", task)
	}
	st, err := p.rt.LoadState(ctx, string(task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Variables.Input) != `"hi"` {
		t.Fatalf("recorded input %s", st.Variables.Input)
	}
	got, err := c.GetTask(ctx, &protocol.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != protocol.TaskStateCompleted || got.ContextID != task.ContextID {
		t.Fatalf("GetTask = %+v, %v", got, err)
	}
}

func TestInputRequiredThenProvideInputCompletes(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	c := sdkClient(t, p.url+"/agents/approver", "alice-token")
	task, err := sendText(ctx, c, "", protocol.NewTextPart("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != protocol.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("task %+v", task)
	}
	meta := task.Status.Message.Metadata
	schema, _ := meta[a2a.MetaSchema].(map[string]any)
	if meta[a2a.MetaGate] != "approve" || schema["type"] != "object" {
		t.Fatalf("status metadata %v", meta)
	}
	done, err := sendText(ctx, c, task.ID, protocol.NewDataPart(map[string]any{"ok": true}))
	if err != nil {
		t.Fatal(err)
	}
	if done.ID != task.ID || done.Status.State != protocol.TaskStateCompleted || artifactText(done) != "approved deploy" {
		t.Fatalf("task %+v", done)
	}
}

func TestInputTheGateSchemaRefusesAppendsNothing(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	c := sdkClient(t, p.url+"/agents/approver", "alice-token")
	task, err := sendText(ctx, c, "", protocol.NewTextPart("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	before := logCounts(t, p.stores)
	_, err = sendText(ctx, c, task.ID, protocol.NewDataPart(map[string]any{"ok": "yes"}))
	if !errors.Is(err, protocol.ErrInvalidParams) {
		t.Fatalf("err = %v, want invalid params", err)
	}
	if after := logCounts(t, p.stores); !sameCounts(before, after) {
		t.Fatalf("the refusal appended: %v → %v", before, after)
	}
	got, err := c.GetTask(ctx, &protocol.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != protocol.TaskStateInputRequired {
		t.Fatalf("GetTask = %+v, %v", got, err)
	}
}

func TestAnotherCallersTaskIsNotFound(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	alice := sdkClient(t, p.url+"/agents/approver", "alice-token")
	bob := sdkClient(t, p.url+"/agents/approver", "bob-token")
	task, err := sendText(ctx, alice, "", protocol.NewTextPart("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	before := logCounts(t, p.stores)
	for _, id := range []protocol.TaskID{task.ID, "a2a-0123456789abcdef0123456789abcdef", "not-a-task"} {
		_, getErr := bob.GetTask(ctx, &protocol.GetTaskRequest{ID: id})
		_, sendErr := sendText(ctx, bob, id, protocol.NewDataPart(map[string]any{"ok": true}))
		_, cancelErr := bob.CancelTask(ctx, &protocol.CancelTaskRequest{ID: id})
		for op, err := range map[string]error{"get": getErr, "send": sendErr, "cancel": cancelErr} {
			if !errors.Is(err, protocol.ErrTaskNotFound) {
				t.Fatalf("%s %s: err = %v, want task not found", op, id, err)
			}
			var e *protocol.Error
			if !errors.As(err, &e) || e.Message != "task not found" {
				t.Fatalf("%s %s: the refusal %v tells a foreign task from a missing one", op, id, err)
			}
		}
	}
	// The agent is part of the scope: alice's task is not the echo agent's.
	aliceEcho := sdkClient(t, p.url+"/agents/echo", "alice-token")
	if _, err := aliceEcho.GetTask(ctx, &protocol.GetTaskRequest{ID: task.ID}); !errors.Is(err, protocol.ErrTaskNotFound) {
		t.Fatalf("another agent's get: err = %v", err)
	}
	if after := logCounts(t, p.stores); !sameCounts(before, after) {
		t.Fatalf("the refusals appended: %v → %v", before, after)
	}
	if got, err := alice.GetTask(ctx, &protocol.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != protocol.TaskStateInputRequired {
		t.Fatalf("alice's own get = %+v, %v", got, err)
	}
}

func TestUnauthenticatedAndUnauthorizedAreRefusedNothingStarted(t *testing.T) {
	errDenied := errors.New("bob may not use echo")
	p := publish(t, func(o *a2a.ServerOptions) {
		o.Authorize = func(_ context.Context, c a2a.Caller, agent string) error {
			if c.ID == "bob" && agent == "echo" {
				return errDenied
			}
			return nil
		}
	})
	ctx := testContext(t)
	for name, tc := range map[string]struct {
		token string
		want  error
	}{
		"no token":     {"", protocol.ErrUnauthenticated},
		"wrong token":  {"mallory", protocol.ErrUnauthenticated},
		"unauthorized": {"bob-token", protocol.ErrUnauthorized},
	} {
		c := sdkClient(t, p.url+"/agents/echo", tc.token)
		_, err := sendText(ctx, c, "", protocol.NewTextPart("hi"))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", name, err, tc.want)
		}
		for _, leak := range []string{errNoToken.Error(), errDenied.Error()} {
			if err != nil && containsWord(err.Error(), leak) {
				t.Fatalf("%s: the refusal %q echoes the server's reason", name, err)
			}
		}
		if _, err := c.GetTask(ctx, &protocol.GetTaskRequest{ID: "a2a-x"}); !errors.Is(err, tc.want) {
			t.Fatalf("%s: get err = %v, want %v", name, err, tc.want)
		}
	}
	if n := logCounts(t, p.stores); len(n) != 0 {
		t.Fatalf("refused calls started executions: %v", n)
	}
}

func TestCancelCancelsTheCallersTask(t *testing.T) {
	p := publish(t, nil)
	ctx := testContext(t)
	c := sdkClient(t, p.url+"/agents/approver", "alice-token")
	task, err := sendText(ctx, c, "", protocol.NewTextPart("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.CancelTask(ctx, &protocol.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != protocol.TaskStateCanceled {
		t.Fatalf("CancelTask = %+v, %v", got, err)
	}
	before := logCounts(t, p.stores)
	if _, err := c.CancelTask(ctx, &protocol.CancelTaskRequest{ID: task.ID}); !errors.Is(err, protocol.ErrTaskNotCancelable) {
		t.Fatalf("second cancel: err = %v", err)
	}
	if _, err := sendText(ctx, c, task.ID, protocol.NewDataPart(map[string]any{"ok": true})); !errors.Is(err, protocol.ErrUnsupportedOperation) {
		t.Fatalf("input to a canceled task: err = %v", err)
	}
	if after := logCounts(t, p.stores); !sameCounts(before, after) {
		t.Fatalf("the refusals appended: %v → %v", before, after)
	}
}

func TestNewServerIsSecureByDefault(t *testing.T) {
	rt := newRuntime(t, memstore.NewSet(), nil, echoFlow())
	agents := []a2a.PublishedAgent{{Name: "echo", FlowID: "echo"}}
	for name, opts := range map[string]a2a.ServerOptions{
		"neither":          {Agents: agents},
		"no authorizer":    {Agents: agents, Authenticate: bearerAuth},
		"no authenticator": {Agents: agents, Authorize: allowAll},
	} {
		_, err := a2a.NewServer(rt, opts)
		var ce *a2a.ConfigError
		if !errors.Is(err, a2a.ErrUnsecured) || !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want ErrUnsecured", name, err)
		}
	}
	for name, opts := range map[string]a2a.ServerOptions{
		"unknown flow": {Agents: []a2a.PublishedAgent{{Name: "x", FlowID: "nope"}}, Insecure: true},
		"bad name":     {Agents: []a2a.PublishedAgent{{Name: "a b", FlowID: "echo"}}, Insecure: true},
		"no agents":    {Insecure: true},
	} {
		var ce *a2a.ConfigError
		if _, err := a2a.NewServer(rt, opts); !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want *ConfigError", name, err)
		}
	}
	if _, err := a2a.NewServer(rt, a2a.ServerOptions{Agents: agents, Insecure: true}); err != nil {
		t.Fatalf("insecure: %v", err)
	}
}

func TestListenBindsLoopbackAndRefusesInsecureRemote(t *testing.T) {
	ln, err := a2a.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := splitHost(ln.Addr().String())
	_ = ln.Close()
	if host != "127.0.0.1" {
		t.Fatalf("Listen bound %s", host)
	}
	if _, err := a2a.Listen("0.0.0.0:0"); !errors.Is(err, a2a.ErrNotLoopback) {
		t.Fatalf("Listen 0.0.0.0: err = %v", err)
	}
	rt := newRuntime(t, memstore.NewSet(), nil, echoFlow())
	srv, err := a2a.NewServer(rt, a2a.ServerOptions{Agents: []a2a.PublishedAgent{{Name: "echo", FlowID: "echo"}}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(testContext(t), remoteListener{}); !errors.Is(err, a2a.ErrInsecureRemote) {
		t.Fatalf("Serve beyond loopback: err = %v", err)
	}
}

func TestInsecureServerServesAnonymousCallers(t *testing.T) {
	stores := memstore.NewSet()
	rt := newRuntime(t, stores, nil, echoFlow())
	srv, err := a2a.NewServer(rt, a2a.ServerOptions{Agents: []a2a.PublishedAgent{{Name: "echo", FlowID: "echo"}}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := a2a.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	c := sdkClient(t, "http://"+ln.Addr().String(), "")
	task, err := sendText(ctx, c, "", protocol.NewTextPart("hi"))
	if err != nil || task.Status.State != protocol.TaskStateCompleted {
		t.Fatalf("send = %+v, %v", task, err)
	}
	st, err := rt.LoadState(ctx, string(task.ID))
	if err != nil {
		t.Fatal(err)
	}
	var p loom.Principal
	if err := jsonUnmarshal(st.Variables.Principal, &p); err != nil || p.ID != a2a.AnonymousCaller.ID {
		t.Fatalf("principal %s (%v)", st.Variables.Principal, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
