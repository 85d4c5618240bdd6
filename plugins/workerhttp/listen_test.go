package workerhttp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

func TestListenBindsLoopbackByDefault(t *testing.T) {
	for _, addr := range []string{"", ":0", "127.0.0.1:0", "localhost:0"} {
		ln, err := workerhttp.Listen(addr)
		if err != nil {
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		ip := ln.Addr().(*net.TCPAddr).IP
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		if !ip.IsLoopback() {
			t.Fatalf("Listen(%q) bound %v, want loopback", addr, ip)
		}
	}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:8080", "worker.internal:8080"} {
		if _, err := workerhttp.Listen(addr); !errors.Is(err, workerhttp.ErrNotLoopback) {
			t.Fatalf("Listen(%q): %v, want ErrNotLoopback without AllowRemote", addr, err)
		}
	}
	ln, err := workerhttp.Listen("0.0.0.0:0", workerhttp.AllowRemote())
	if err != nil {
		t.Fatalf("explicit address with AllowRemote: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
}

func echoWorker() dispatch.WorkerRuntime {
	return workerFunc(func(_ context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
		return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted, Output: pkg.Input}, nil
	})
}

// An unauthenticated server is for loopback only: Serve refuses it on any
// other listener.
func TestServeRefusesAnInsecureServerBeyondLoopback(t *testing.T) {
	srv, err := workerhttp.NewServer(echoWorker(), workerhttp.Options{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := workerhttp.Listen("0.0.0.0:0", workerhttp.AllowRemote())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context(), ln); !errors.Is(err, workerhttp.ErrInsecureRemote) {
		t.Fatalf("Serve: %v, want ErrInsecureRemote", err)
	}
}

// Serve answers until its ctx ends, then shuts down cleanly.
func TestServeServesUntilItsContextEnds(t *testing.T) {
	srv, err := workerhttp.NewServer(echoWorker(), workerhttp.Options{Authenticate: workerhttp.BearerToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := workerhttp.Listen("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	w, err := workerhttp.NewRemoteWorker("http://"+ln.Addr().String(), workerhttp.ClientOptions{Token: token, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "e-1", FlowID: "f", Input: []byte(`"<&>"`)})
	if err != nil || string(res.Output) != `"<&>"` {
		t.Fatalf("through Serve: %+v, %v; want the output byte-exact", res, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve after its ctx ended: %v, want nil", err)
	}
	if _, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "e-2", FlowID: "f"}); err == nil ||
		!strings.Contains(err.Error(), "sending the package") || !dispatch.IsRetryable(err) {
		t.Fatalf("after shutdown: %v, want a retryable transport error", err)
	}
}
