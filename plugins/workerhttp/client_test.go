package workerhttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

func TestNewRemoteWorkerRefusesUnsafeOptions(t *testing.T) {
	bad := map[string]struct {
		url  string
		opts workerhttp.ClientOptions
	}{
		"not a URL":            {"::", workerhttp.ClientOptions{}},
		"no scheme":            {"worker:8080", workerhttp.ClientOptions{}},
		"ftp":                  {"ftp://worker", workerhttp.ClientOptions{}},
		"no host":              {"http://", workerhttp.ClientOptions{}},
		"query":                {"https://worker/?x=1", workerhttp.ClientOptions{}},
		"userinfo":             {"https://u:p@worker", workerhttp.ClientOptions{}},
		"token with a newline": {"https://worker", workerhttp.ClientOptions{Token: "t\r\nX-Evil: 1"}},
		"negative cap":         {"https://worker", workerhttp.ClientOptions{MaxResponseBytes: -1}},
		"token in clear text":  {"http://10.0.0.5:8080", workerhttp.ClientOptions{Token: token}},
		"authorize in clear":   {"http://worker.internal", workerhttp.ClientOptions{Authorize: func(*http.Request) error { return nil }}},
	}
	for name, c := range bad {
		if _, err := workerhttp.NewRemoteWorker(c.url, c.opts); !errors.Is(err, workerhttp.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
	good := map[string]struct {
		url  string
		opts workerhttp.ClientOptions
	}{
		"https with a token":   {"https://worker.internal/base/", workerhttp.ClientOptions{Token: token}},
		"loopback http":        {"http://127.0.0.1:8080", workerhttp.ClientOptions{Token: token}},
		"localhost http":       {"http://localhost:8080", workerhttp.ClientOptions{Token: token}},
		"clear text, allowed":  {"http://10.0.0.5:8080", workerhttp.ClientOptions{Token: token, AllowPlainHTTP: true}},
		"no credentials, http": {"http://10.0.0.5:8080", workerhttp.ClientOptions{}},
	}
	for name, c := range good {
		if _, err := workerhttp.NewRemoteWorker(c.url, c.opts); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// statusServer answers every request with status and body, counting them.
func statusServer(t *testing.T, status int, body string) (string, *http.Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	url, c := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	return url, c, &n
}

func remoteTo(t *testing.T, url string, c *http.Client) *workerhttp.RemoteWorker {
	t.Helper()
	w, err := workerhttp.NewRemoteWorker(url, workerhttp.ClientOptions{Token: token, HTTPClient: c})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var order = dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders"}

// A 5xx is retryable, a 4xx is not; the kernel's typed errors survive the
// trip; a proxy's page still yields a status.
func TestRemoteWorkerErrorsAreTypedAndClassified(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		body      string
		retryable bool
		check     func(error) bool
	}{
		{"unavailable", 503, `{"error":{"code":"unavailable","message":"stopping"}}`, true, nil},
		{"internal", 500, `{"error":{"code":"internal","message":"internal error"}}`, true, nil},
		{"proxy page", 502, `<html>bad gateway</html>`, true, func(err error) bool {
			var re *workerhttp.RemoteError
			return errors.As(err, &re) && re.Code == "" && re.StatusCode == 502
		}},
		{"rate limited", 429, ``, true, nil},
		{"unauthenticated", 401, `{"error":{"code":"unauthenticated","message":"m"}}`, false, func(err error) bool {
			return errors.Is(err, workerhttp.ErrUnauthenticated)
		}},
		{"unknown flow", 422, `{"error":{"code":"unknown_flow","message":"m"}}`, false, func(err error) bool {
			return errors.Is(err, loom.ErrUnknownFlow)
		}},
		{"not found", 404, `{"error":{"code":"execution_not_found","message":"m"}}`, false, func(err error) bool {
			return errors.Is(err, loom.ErrExecutionNotFound)
		}},
		{"refused", 409, `{"error":{"code":"resume_refused","message":"m","reason":"gate-mismatch"}}`, false, func(err error) bool {
			var r *loom.ResumeRefusedError
			return errors.As(err, &r) && r.Reason == loom.RefusedGateMismatch && r.ExecutionID == "o-1"
		}},
		{"payload invalid", 422, `{"error":{"code":"payload_invalid","message":"m"}}`, false, func(err error) bool {
			var r *loom.ResumePayloadValidationError
			return errors.As(err, &r)
		}},
		{"denied", 403, `{"error":{"code":"denied","message":"m"}}`, false, func(err error) bool {
			var r *loom.ExecutionDeniedError
			return errors.As(err, &r)
		}},
		{"invalid package", 400, `{"error":{"code":"invalid_package","message":"m"}}`, false, func(err error) bool {
			return errors.Is(err, dispatch.ErrInvalidPackage)
		}},
		{"busy refusal", 503, `{"error":{"code":"busy","message":"m","reason":"busy"}}`, true, func(err error) bool {
			var r *loom.ResumeRefusedError
			return errors.As(err, &r) && r.Reason == loom.RefusedBusy
		}},
		{"wrong execution", 200, `{"executionId":"o-2","status":"completed","sequence":1}`, false, func(err error) bool {
			var p *workerhttp.ProtocolError
			return errors.As(err, &p)
		}},
		{"no status", 200, `{"executionId":"o-1","sequence":1}`, false, func(err error) bool {
			var p *workerhttp.ProtocolError
			return errors.As(err, &p)
		}},
		{"not JSON", 200, `ok`, false, func(err error) bool {
			var p *workerhttp.ProtocolError
			return errors.As(err, &p)
		}},
	}
	for _, c := range cases {
		url, hc, _ := statusServer(t, c.status, c.body)
		_, err := remoteTo(t, url, hc).Execute(t.Context(), order)
		if err == nil || dispatch.IsRetryable(err) != c.retryable || (c.check != nil && !c.check(err)) {
			t.Errorf("%s: %v (retryable %v), want retryable %v and the typed error", c.name, err, dispatch.IsRetryable(err), c.retryable)
		}
	}
}

func TestRemoteWorkerToleratesAdditiveResultFields(t *testing.T) {
	url, hc, _ := statusServer(t, 200, `{"executionId":"o-1","status":"completed","output":1,"sequence":4,"worker":"w-7"}`)
	res, err := remoteTo(t, url, hc).Execute(t.Context(), order)
	if err != nil || res.Status != fold.StatusCompleted || string(res.Output) != "1" || res.Sequence != 4 {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestRemoteWorkerCapsTheAnswer(t *testing.T) {
	url, hc, _ := statusServer(t, 200, `{"executionId":"o-1","status":"completed","output":"`+strings.Repeat("x", 2048)+`","sequence":4}`)
	w, err := workerhttp.NewRemoteWorker(url, workerhttp.ClientOptions{HTTPClient: hc, MaxResponseBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	var p *workerhttp.ProtocolError
	if _, err := w.Execute(t.Context(), order); !errors.As(err, &p) {
		t.Fatalf("oversized answer: %v, want *ProtocolError", err)
	}
}

// No answer at all is a retryable *TransportError; the caller's own ended
// ctx is its error, not retryable.
func TestRemoteWorkerTransportFailures(t *testing.T) {
	url, hc, _ := statusServer(t, 200, ``)
	w := remoteTo(t, url+"/", hc)
	_, err := w.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "o-1", FlowID: "orders"})
	if err == nil {
		t.Fatal("an empty 200 was accepted")
	}
	dead, err := workerhttp.NewRemoteWorker("http://127.0.0.1:1", workerhttp.ClientOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dead.Execute(t.Context(), order)
	var te *workerhttp.TransportError
	if !errors.As(err, &te) || !dispatch.IsRetryable(err) {
		t.Fatalf("refused connection: %v, want a retryable *TransportError", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := dead.Execute(ctx, order); !errors.Is(err, context.Canceled) || dispatch.IsRetryable(err) {
		t.Fatalf("ended ctx: %v, want context.Canceled, not retryable", err)
	}
	if _, err := dead.Execute(t.Context(), dispatch.ExecutionPackage{ExecutionID: "o-1"}); !errors.Is(err, dispatch.ErrInvalidPackage) {
		t.Fatalf("invalid package: %v, want it refused before sending", err)
	}
}

// A redirect is never followed: the token is never replayed to the target.
func TestRemoteWorkerNeverFollowsRedirects(t *testing.T) {
	var leaked atomic.Int32
	elsewhere, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
	}))
	url, hc := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere+workerhttp.Path, http.StatusTemporaryRedirect)
	}))
	_, err := remoteTo(t, url, hc).Execute(t.Context(), order)
	var re *workerhttp.RemoteError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTemporaryRedirect || dispatch.IsRetryable(err) {
		t.Fatalf("redirect: %v, want a non-retryable *RemoteError 307", err)
	}
	if leaked.Load() != 0 {
		t.Fatal("the token followed the redirect")
	}
}

func TestRemoteWorkerSendsCredentials(t *testing.T) {
	var auth, extra, ctype string
	url, hc := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, extra, ctype = r.Header.Get("Authorization"), r.Header.Get("X-Signed"), r.Header.Get("Content-Type")
		_, _ = w.Write([]byte(`{"executionId":"o-1","status":"suspended","sequence":2}`))
	}))
	w, err := workerhttp.NewRemoteWorker(url, workerhttp.ClientOptions{Token: token, HTTPClient: hc,
		Authorize: func(r *http.Request) error { r.Header.Set("X-Signed", "sig"); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Execute(t.Context(), order); err != nil {
		t.Fatal(err)
	}
	if auth != bearer || extra != "sig" || ctype != "application/json" {
		t.Fatalf("headers Authorization=%q X-Signed=%q Content-Type=%q", auth, extra, ctype)
	}
	denied := errors.New("no identity token")
	w2, _ := workerhttp.NewRemoteWorker(url, workerhttp.ClientOptions{HTTPClient: hc, Authorize: func(*http.Request) error { return denied }})
	if _, err := w2.Execute(t.Context(), order); !errors.Is(err, denied) {
		t.Fatalf("failing Authorize: %v, want its error before sending", err)
	}
}
