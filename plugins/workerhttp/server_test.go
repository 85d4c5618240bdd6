package workerhttp_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/dispatch"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/plugins/workerhttp"
)

const (
	startOrder = `{"executionId":"o-1","flowId":"orders","input":"sku-1"}`
	jsonType   = "application/json"
	bearer     = "Bearer " + token
)

// workerFunc is a WorkerRuntime for tests.
type workerFunc func(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error)

func (f workerFunc) Execute(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
	return f(ctx, pkg)
}

func TestNewServerRefusesToStartWithoutAnAuthenticator(t *testing.T) {
	w := workerFunc(func(context.Context, dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
		return dispatch.ExecutionResult{}, nil
	})
	_, err := workerhttp.NewServer(w, workerhttp.Options{})
	var oe *workerhttp.OptionsError
	if !errors.As(err, &oe) || oe.Field != "Options.Authenticate" || !errors.Is(err, workerhttp.ErrInvalidOptions) {
		t.Fatalf("no authenticator: %v, want an *OptionsError on Options.Authenticate", err)
	}
	for name, opts := range map[string]workerhttp.Options{
		"negative body cap":   {Insecure: true, MaxBodyBytes: -1},
		"negative timeout":    {Insecure: true, Timeout: -1},
		"negative concurrent": {Insecure: true, MaxConcurrent: -1},
	} {
		if _, err := workerhttp.NewServer(w, opts); !errors.Is(err, workerhttp.ErrInvalidOptions) {
			t.Errorf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
	if _, err := workerhttp.NewServer(nil, workerhttp.Options{Insecure: true}); !errors.Is(err, workerhttp.ErrInvalidOptions) {
		t.Errorf("nil worker: %v, want ErrInvalidOptions", err)
	}
	if _, err := workerhttp.NewServer(w, workerhttp.Options{Insecure: true}); err != nil {
		t.Fatalf("explicitly insecure: %v", err)
	}
}

// Authentication comes first: without the right bearer token nothing else
// is looked at, not even the path or the method, and the refusal says
// nothing about what was presented.
func TestServerRequiresAndEnforcesAuthentication(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{})
	for name, auth := range map[string]string{
		"no token":     "",
		"wrong token":  "Bearer not-the-t0ken",
		"other scheme": "Basic " + token,
		"bare token":   token,
	} {
		status, hdr, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, auth, startOrder)
		if status != http.StatusUnauthorized || errorCode(t, body).Code != workerhttp.CodeUnauthenticated {
			t.Fatalf("%s: %d %s, want 401 unauthenticated", name, status, body)
		}
		if hdr.Get("WWW-Authenticate") == "" || strings.Contains(body, "not-the-t0ken") || strings.Contains(body, token) {
			t.Fatalf("%s: header %q body %q: want a challenge, no echo", name, hdr.Get("WWW-Authenticate"), body)
		}
	}
	if status, _, _ := post(t, s.http, http.MethodGet, s.url+"/elsewhere", "", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated GET of another path: %d, want 401 before anything else", status)
	}
	if _, err := s.rt.LoadState(t.Context(), "o-1"); !errors.Is(err, loom.ErrExecutionNotFound) {
		t.Fatalf("a refused request started the execution: %v", err)
	}
	status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, startOrder)
	if status != http.StatusOK || !strings.Contains(body, `"status":"suspended"`) {
		t.Fatalf("with the token: %d %s, want 200 suspended", status, body)
	}
}

func TestServerInsecureModeIsExplicit(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{Insecure: true})
	status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, "", startOrder)
	if status != http.StatusOK {
		t.Fatalf("insecure server without credentials: %d %s, want 200", status, body)
	}
}

func TestServerCapsTheBody(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{MaxBodyBytes: 256})
	big := `{"executionId":"o-1","flowId":"orders","input":"` + strings.Repeat("x", 300) + `"}`
	status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, big)
	if status != http.StatusRequestEntityTooLarge || errorCode(t, body).Code != workerhttp.CodeBodyTooLarge {
		t.Fatalf("over the cap: %d %s, want 413 body_too_large", status, body)
	}
	if strings.Contains(body, "xxxx") {
		t.Fatalf("the refusal echoes the body: %s", body)
	}
	// Without a Content-Length the cap holds while reading.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+workerhttp.Path, struct{ *strings.Reader }{strings.NewReader(big)})
	req.ContentLength = -1 // unknown: sent chunked
	req.Header.Set("Content-Type", jsonType)
	req.Header.Set("Authorization", bearer)
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked over the cap: %d, want 413", resp.StatusCode)
	}
	if status, _, _ := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, startOrder); status != http.StatusOK {
		t.Fatalf("under the cap: %d, want 200", status)
	}
}

func TestServerRefusesOtherMethodsPathsAndContentTypes(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{})
	cases := []struct {
		name, method, path, ctype string
		status                    int
		code                      string
	}{
		{"GET", http.MethodGet, workerhttp.Path, "", http.StatusMethodNotAllowed, workerhttp.CodeMethodNotAllowed},
		{"PUT", http.MethodPut, workerhttp.Path, jsonType, http.StatusMethodNotAllowed, workerhttp.CodeMethodNotAllowed},
		{"other path", http.MethodPost, "/run", jsonType, http.StatusNotFound, workerhttp.CodeNotFound},
		{"text/plain", http.MethodPost, workerhttp.Path, "text/plain", http.StatusUnsupportedMediaType, workerhttp.CodeUnsupportedMediaType},
		{"no content type", http.MethodPost, workerhttp.Path, "", http.StatusUnsupportedMediaType, workerhttp.CodeUnsupportedMediaType},
		{"json look-alike", http.MethodPost, workerhttp.Path, "application/jsonx", http.StatusUnsupportedMediaType, workerhttp.CodeUnsupportedMediaType},
	}
	for _, c := range cases {
		status, hdr, body := post(t, s.http, c.method, s.url+c.path, c.ctype, bearer, startOrder)
		if status != c.status || errorCode(t, body).Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, body, c.status, c.code)
		}
		if c.status == http.StatusMethodNotAllowed && hdr.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow %q, want POST", c.name, hdr.Get("Allow"))
		}
	}
	if status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, "application/json; charset=utf-8", bearer, startOrder); status != http.StatusOK {
		t.Fatalf("application/json with a charset: %d %s, want 200", status, body)
	}
}

// A refusal names what was wrong, never the data: neither the package's
// payload nor its credentials come back.
func TestServerRefusalsNeverEchoPayloadOrCredentials(t *testing.T) {
	s := newStack(t, []*loom.Flow{gateFlow()}, workerhttp.Options{})
	if status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, startOrder); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	cases := []struct {
		body, code string
		status     int
	}{
		{`{"executionId":"o-1","flowId":"orders","resume":{"eventType":"wrong-gate","payload":"card-4242","credentials":"tok-9999"}}`, workerhttp.CodeResumeRefused, http.StatusConflict},
		{`{"executionId":"o-1","flowId":"orders","resume":{"eventType":"approve","payload":"card-4242"},"credentials":"tok-9999"}`, workerhttp.CodeInvalidPackage, http.StatusBadRequest},
		{`{"executionId":"o-1","flowId":"orders","resume":{"eventType":"approve","payload":card-4242,"credentials":"tok-9999"}}`, workerhttp.CodeInvalidPackage, http.StatusBadRequest},
		{`{"executionId":"o-2","flowId":"no-such-flow","input":"card-4242"}`, workerhttp.CodeUnknownFlow, http.StatusUnprocessableEntity},
		{`{"executionId":"nope","flowId":"orders","resume":{"eventType":"approve","payload":"card-4242"}}`, workerhttp.CodeExecutionNotFound, http.StatusNotFound},
	}
	for _, c := range cases {
		status, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, c.body)
		obj := errorCode(t, body)
		if status != c.status || obj.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.body, status, body, c.status, c.code)
		}
		if strings.Contains(body, "card-4242") || strings.Contains(body, "tok-9999") {
			t.Errorf("%s: the refusal echoes the data: %s", c.body, body)
		}
	}
	_, _, body := post(t, s.http, http.MethodPost, s.url+workerhttp.Path, jsonType, bearer, cases[0].body)
	if obj := errorCode(t, body); obj.Reason != string(loom.RefusedGateMismatch) {
		t.Fatalf("resume refusal reason %q, want %q", obj.Reason, loom.RefusedGateMismatch)
	}
}

// Every error a worker can return maps to a stable code and status; the
// unmapped ones are logged by the package's coordinates, never sent.
func TestServerMapsWorkerErrors(t *testing.T) {
	var next error
	w := workerFunc(func(context.Context, dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
		return dispatch.ExecutionResult{}, next
	})
	var logs bytes.Buffer
	srv, err := workerhttp.NewServer(w, workerhttp.Options{Authenticate: workerhttp.BearerToken(token),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	url, c := serve(t, srv)
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{&loom.ResumeRefusedError{Reason: loom.RefusedTerminal}, http.StatusConflict, workerhttp.CodeResumeRefused},
		{&loom.ResumeRefusedError{Reason: loom.RefusedBusy}, http.StatusServiceUnavailable, workerhttp.CodeBusy},
		{&loom.ResumePayloadValidationError{Gate: "g", Detail: "card-4242 is not a boolean"}, http.StatusUnprocessableEntity, workerhttp.CodePayloadInvalid},
		{&loom.ExecutionDeniedError{Action: "start", Reason: "tenant t-9 over quota"}, http.StatusForbidden, workerhttp.CodeDenied},
		{loom.ErrFeatureDisabled, http.StatusUnprocessableEntity, workerhttp.CodeFeatureDisabled},
		{&dispatch.StartInFlightError{ExecutionID: "o-1"}, http.StatusServiceUnavailable, workerhttp.CodeBusy},
		{context.DeadlineExceeded, http.StatusGatewayTimeout, workerhttp.CodeDeadlineExceeded},
		{loom.ErrRuntimeClosed, http.StatusServiceUnavailable, workerhttp.CodeUnavailable},
		{&loom.JournalError{ExecutionID: "o-1", Err: errors.New("password=hunter2 rejected")}, http.StatusInternalServerError, workerhttp.CodeInternal},
	}
	for _, tc := range cases {
		next = tc.err
		status, _, body := post(t, c, http.MethodPost, url+workerhttp.Path, jsonType, bearer,
			`{"executionId":"o-1","flowId":"orders","input":"card-4242"}`)
		if status != tc.status || errorCode(t, body).Code != tc.code {
			t.Errorf("%T: %d %s, want %d %s", tc.err, status, body, tc.status, tc.code)
		}
		for _, secret := range []string{"hunter2", "card-4242", "t-9"} {
			if strings.Contains(body, secret) {
				t.Errorf("%T: the answer leaks %q: %s", tc.err, secret, body)
			}
		}
	}
	if !strings.Contains(logs.String(), "hunter2") || strings.Contains(logs.String(), "card-4242") {
		t.Fatalf("log %s: want the internal cause, and the package by coordinates only", logs.String())
	}
}

// Beyond MaxConcurrent a package is shed at once with a retryable 503.
func TestServerShedsLoadBeyondMaxConcurrent(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	w := workerFunc(func(ctx context.Context, pkg dispatch.ExecutionPackage) (dispatch.ExecutionResult, error) {
		close(entered)
		<-release
		return dispatch.ExecutionResult{ExecutionID: pkg.ExecutionID, Status: fold.StatusCompleted}, nil
	})
	srv, err := workerhttp.NewServer(w, workerhttp.Options{Insecure: true, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, c := serve(t, srv)
	first := make(chan int, 1)
	go func() {
		resp, err := c.Post(url+workerhttp.Path, jsonType, strings.NewReader(startOrder))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered
	status, _, body := post(t, c, http.MethodPost, url+workerhttp.Path, jsonType, "", startOrder)
	if status != http.StatusServiceUnavailable || errorCode(t, body).Code != workerhttp.CodeBusy {
		t.Fatalf("beyond the bound: %d %s, want 503 busy", status, body)
	}
	close(release)
	if s := <-first; s != http.StatusOK {
		t.Fatalf("the first package: %d, want 200", s)
	}
}
