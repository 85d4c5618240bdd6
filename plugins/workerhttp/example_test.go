package workerhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/plugins/workerhttp"
	"github.com/loom-kernel/loom/store/memstore"
)

// A worker node serves its runtime on loopback behind a bearer token; an
// orchestrator dispatches packages to it with a RemoteWorker. Only
// coordinates cross the network: the worker has the flow registered by id.
func ExampleNewServer() {
	flow := loom.NewFlow("greet", func(ctx *loom.Context, name string) (string, error) {
		ok, err := loom.Suspend[bool](ctx, "confirm")
		if err != nil || !ok {
			return "", err
		}
		return "hello " + name, nil
	})
	rt, _ := loom.New(loom.Config{Events: memstore.NewEventStore(), Flows: []*loom.Flow{flow}})
	defer rt.Close()

	// The worker node.
	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: rt},
		workerhttp.Options{Authenticate: workerhttp.BearerToken("t0ken")})
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, _ := workerhttp.Listen("") // 127.0.0.1, a free port
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	// The orchestrator.
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	w, _ := workerhttp.NewRemoteWorker("http://"+ln.Addr().String(),
		workerhttp.ClientOptions{Token: "t0ken", HTTPClient: &http.Client{Transport: transport}})
	d := &dispatch.LocalDispatcher{Worker: w, MaxConcurrent: 4}

	res, err := d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "g-1", FlowID: "greet", Input: json.RawMessage(`"ada"`)})
	fmt.Println(res.Status, res.SuspendedOn, err)
	_, err = d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "g-1", FlowID: "greet",
		Resume: &dispatch.ResumeHint{EventType: "wrong", Payload: json.RawMessage(`true`)}})
	var refused *loom.ResumeRefusedError
	fmt.Println(errors.As(err, &refused), refused.Reason, dispatch.IsRetryable(err))
	res, err = d.Dispatch(ctx, dispatch.ExecutionPackage{ExecutionID: "g-1", FlowID: "greet",
		Resume: &dispatch.ResumeHint{EventType: "confirm", Payload: json.RawMessage(`true`)}})
	fmt.Println(res.Status, string(res.Output), err)

	stop()
	fmt.Println(<-served)
	// Output:
	// suspended confirm <nil>
	// true gate-mismatch false
	// completed "hello ada" <nil>
	// <nil>
}

// A server without an authenticator is refused unless insecure mode is
// asked for by name.
func ExampleNewServer_insecure() {
	worker := &dispatch.LocalWorker{}
	_, err := workerhttp.NewServer(worker, workerhttp.Options{})
	fmt.Println(errors.Is(err, workerhttp.ErrInvalidOptions))
	_, err = workerhttp.NewServer(worker, workerhttp.Options{Insecure: true})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}

// A RemoteWorker refuses to send a token in clear text beyond loopback.
func ExampleNewRemoteWorker() {
	_, err := workerhttp.NewRemoteWorker("http://10.0.0.5:8080", workerhttp.ClientOptions{Token: "t0ken"})
	fmt.Println(errors.Is(err, workerhttp.ErrInvalidOptions))
	_, err = workerhttp.NewRemoteWorker("https://worker-1.internal", workerhttp.ClientOptions{Token: "t0ken"})
	fmt.Println(err)
	// Output:
	// true
	// <nil>
}

// Listen binds loopback unless a remote address is allowed explicitly.
func ExampleListen() {
	_, err := workerhttp.Listen("0.0.0.0:8080")
	fmt.Println(errors.Is(err, workerhttp.ErrNotLoopback))
	ln, err := workerhttp.Listen(":0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	fmt.Println(host)
	// Output:
	// true
	// 127.0.0.1
}
