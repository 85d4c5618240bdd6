package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/inspect"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

// StateAt is time travel over a store: the folded state after any event.
func ExampleSource_StateAt() {
	flow := loom.NewFlow("wait", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "go")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "wait", nil, loom.WithExecutionID("w-1"))
	_, _ = rt.WaitForSuspend(ctx, id)

	src := inspect.Source{Events: events}
	first, _ := src.StateAt(ctx, "w-1", 0)
	latest, _ := src.StateAt(ctx, "w-1", -1)
	fmt.Println(first.Sequence, first.Status)
	fmt.Println(latest.Sequence, latest.Status, latest.Variables.SuspendedOn.On)
	// Output:
	// 0 running
	// 1 suspended go
}

// New serves the web inspector over a Source; PollingFollow lets it follow
// a log that another process writes.
func ExampleNew() {
	events := memstore.NewEventStore()
	in, err := inspect.New(inspect.Source{Events: events, Follow: inspect.PollingFollow(events, 250*time.Millisecond)}, inspect.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer in.Close()
	srv := httptest.NewServer(in)
	defer srv.Close()
	fmt.Println("serving the inspector:", srv.URL != "")
	// Output:
	// serving the inspector: true
}

// With Actions and a Token the inspector acts on the running app through
// its wire ABI. A page logs in with GET /?token=<Token>; a script, as here,
// sends the token as a bearer and cancels a parked execution.
func ExampleNew_actions() {
	flow := loom.NewFlow("wait", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "go")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	h, _ := wire.Handler(rt, wire.Options{Events: events, Authenticate: wire.BearerToken("the-app-token", "inspector")})
	app := httptest.NewServer(h)
	defer app.Close()
	client, _ := wire.NewClient(app.URL, wire.WithToken("the-app-token"))

	const login = "a-login-token-of-32-random-bytes"
	in, err := inspect.New(inspect.Source{Events: events}, inspect.Options{Actions: client, Token: login})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(in)
	defer srv.Close()
	defer in.Close()

	ctx := context.Background()
	_, _ = rt.Start(ctx, "wait", nil, loom.WithExecutionID("w-1"))
	_, _ = rt.WaitForSuspend(ctx, "w-1")
	req, _ := http.NewRequest("POST", srv.URL+"/api/act/cancel", strings.NewReader(`{"id":"w-1","reason":"not needed"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+login)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	st, _ := rt.WaitForSettled(ctx, "w-1")
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	fmt.Println(st.Status)
	// Output:
	// 200 {"executionId":"w-1"}
	// cancelled
}

// An inspector mounted in the app's own process checks each log against
// the code the app runs: RuntimeChecker asks the runtime, and the page
// marks where a replay would part from the log.
func ExampleRuntimeChecker() {
	flow := loom.NewFlow("wait", func(ctx *loom.Context, _ struct{}) (string, error) {
		return loom.Suspend[string](ctx, "go")
	})
	events := memstore.NewEventStore()
	rt, _ := loom.New(loom.Config{Events: events, Flows: []*loom.Flow{flow}})
	defer rt.Close()
	ctx := context.Background()
	id, _ := rt.Start(ctx, "wait", nil, loom.WithExecutionID("w-1"))
	_, _ = rt.WaitForSuspend(ctx, id)

	in, _ := inspect.New(inspect.Source{Events: events}, inspect.Options{Check: inspect.RuntimeChecker(rt)})
	defer in.Close()
	srv := httptest.NewServer(in)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/check?id=w-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var got wire.CheckReplayResult
	_ = json.NewDecoder(resp.Body).Decode(&got)
	fmt.Println(got.Report.Verdict, got.Report.Status)
	// Output:
	// compatible suspended
}
