package main

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// TestSendAndRecoverCommands drives loom send and loom recover against a
// real wire server (a runtime with the inbox on, on loopback): a message
// wakes a flow parked on its receive, a refused send records nothing and
// exits 5, and a recovery pass re-drives a start no process drove.
func TestSendAndRecoverCommands(t *testing.T) {
	bin, _ := setup(t)
	events := memstore.NewEventStore()
	collect := loom.NewFlow("shop.collect", func(c *loom.Context, _ struct{}) (string, error) {
		return loom.Receive[string](c, "orders")
	})
	echo := loom.NewFlow("shop.echo", func(c *loom.Context, s string) (string, error) { return s, nil })
	rt, err := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{collect, echo}, Features: loom.Features{Inbox: true},
		Recovery: loom.Recovery{Disabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	h, err := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("t0ken", map[string]string{"user": "carol"})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctl := func(args ...string) []string { return append(args, "--addr", addr, "--token", "t0ken") }

	mustLoom(t, bin, ctl("start", "shop.collect", "--id", "c-1")...)
	if out := mustLoom(t, bin, ctl("send", "c-1", "--topic", "orders", "--payload", `"mug"`)...); out != "Sent to c-1 on topic orders; the message is durable.\n" {
		t.Fatalf("send: %q", out)
	}
	ctx := t.Context()
	res, err := rt.WaitForCompletion(ctx, "c-1")
	if err != nil || string(res.Output) != `"mug"` {
		t.Fatalf("the flow received %s, %v", res.Output, err)
	}

	before, _ := store.Read(ctx, events, "c-1")
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{ctl("send", "c-1", "--topic", "orders", "--payload", `"cup"`), exitRefused, `no message reaches execution "c-1"`},
		{ctl("send", "c-1", "--payload", `"cup"`), exitUsage, "--topic is required"},
		{ctl("send", "c-1", "--topic", "orders", "--payload", "{cup"), exitUsage, "--payload is not JSON"},
		{ctl("send", "c-9", "--topic", "orders"), exitNotFound, "no such execution"},
		{[]string{"send", "c-1", "--topic", "orders", "--addr", addr, "--token", "guess"}, exitRefused, "the app refused the token"},
	} {
		_, errOut, code := loomRun(t, bin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("loom %s: exit %d, %q; want exit %d saying %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.says)
		}
	}
	if after, _ := store.Read(ctx, events, "c-1"); len(after) != len(before) {
		t.Fatalf("a refused send appended: %d -> %d events", len(before), len(after))
	}

	if out := mustLoom(t, bin, ctl("recover")...); out != "Recovered 0 execution(s).\n" {
		t.Fatalf("recover of nothing: %q", out)
	}
	start := event.Envelope{ID: "orphan:0", WorkflowID: "shop.collect", ExecutionID: "orphan", Type: event.ExecutionStarted,
		Payload: json.RawMessage(`{"input":null}`)}
	if err := events.Append(ctx, "orphan", 0, []event.Envelope{start}); err != nil {
		t.Fatal(err)
	}
	var got wire.RecoverResult
	decodeJSON(t, mustLoom(t, bin, ctl("recover", "--json")...), &got)
	if got.Recovered != 1 {
		t.Fatalf("recover --json of a start nobody drove: %+v, want 1", got)
	}

	// resume-as: an ended execution re-opened with a new input.
	mustLoom(t, bin, ctl("start", "shop.echo", "--id", "e-1", "--input", `"old"`)...)
	if _, errOut, code := loomRun(t, bin, ctl("resume-as", "e-1", "--flow", "shop.nothing")...); code != exitNotFound || !strings.Contains(errOut, "shop.nothing") {
		t.Fatalf("resume-as onto an unknown flow: exit %d %s", code, errOut)
	}
	if _, errOut, code := loomRun(t, bin, ctl("resume-as", "e-1", "--input", "{old")...); code != exitUsage || !strings.Contains(errOut, "--input is not JSON") {
		t.Fatalf("resume-as with a bad input: exit %d %s", code, errOut)
	}
	if out := mustLoom(t, bin, ctl("resume-as", "e-1", "--input", `"new"`)...); !strings.HasPrefix(out, "Re-opened e-1.\n") {
		t.Fatalf("resume-as: %q", out)
	}
	if res, err := rt.WaitForCompletion(ctx, "e-1"); err != nil || string(res.Output) != `"new"` {
		t.Fatalf("the re-opened execution: %s, %v; want it completed with its new input", res.Output, err)
	}
}
