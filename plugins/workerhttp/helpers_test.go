package workerhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/plugins/workerhttp"
	"github.com/loom-kernel/loom/store/memstore"
)

const token = "t0ken-s3cret"

// stack is a worker node on loopback: a runtime over memstore, its
// LocalWorker, a worker server in front of it, and a RemoteWorker to it.
type stack struct {
	events *memstore.EventStore
	rt     *loom.Runtime
	url    string
	remote *workerhttp.RemoteWorker
	http   *http.Client
}

func newStack(t *testing.T, flows []*loom.Flow, opts workerhttp.Options) *stack {
	t.Helper()
	events := memstore.NewEventStore()
	rt, err := loom.New(loom.Config{Events: events, Flows: flows})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	if opts.Authenticate == nil && !opts.Insecure {
		opts.Authenticate = workerhttp.BearerToken(token)
	}
	srv, err := workerhttp.NewServer(&dispatch.LocalWorker{Runtime: rt}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{events: events, rt: rt}
	s.url, s.http = serve(t, srv)
	s.remote, err = workerhttp.NewRemoteWorker(s.url, workerhttp.ClientOptions{Token: token, HTTPClient: s.http})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve runs h on a loopback httptest server and returns its URL and a
// client with its own transport, both closed when the test ends.
func serve(t *testing.T, h http.Handler) (string, *http.Client) {
	t.Helper()
	ts := httptest.NewServer(h)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ts.Close()
	})
	return ts.URL, &http.Client{Transport: tr}
}

// post sends body to url+path with the given headers and returns the status
// and the body.
func post(t *testing.T, c *http.Client, method, url, contentType, auth, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// errorCode reads the protocol's error object from a body.
func errorCode(t *testing.T, body string) workerhttp.ErrorObject {
	t.Helper()
	var b struct {
		Error workerhttp.ErrorObject `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.Code == "" {
		t.Fatalf("body %q is not an error object (%v)", body, err)
	}
	return b.Error
}

// gateFlow parks on "approve" and returns "<input> approved=<answer>".
func gateFlow() *loom.Flow {
	return loom.NewFlow("orders", func(ctx *loom.Context, sku string) (string, error) {
		if _, err := ctx.Run("reserve", func(context.Context) (any, error) { return sku, nil }); err != nil {
			return "", err
		}
		ok, err := loom.Suspend[bool](ctx, "approve")
		if err != nil {
			return "", err
		}
		if ok {
			return sku + " approved", nil
		}
		return sku + " refused", nil
	})
}
