package wire_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/store/memstore"
	"github.com/loom-kernel/loom/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test token and the principal it authenticates.
const token = "s3cret-token"

var ann = map[string]any{"user": "ann"}

// approveSchema's pattern makes the validator quote the refused value in
// its own message: the wire must not pass that on.
const approveSchema = `{"type":"object","properties":{"approved":{"type":"boolean"},
"note":{"type":"string","pattern":"^[a-z ]*$"}},"required":["approved"],"additionalProperties":false}`

type order struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

type approval struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note,omitempty"`
}

// orderFlow prices an order, parks at "approve" and ships it when approved.
func orderFlow() *loom.Flow {
	price := loom.NewStep("price", func(_ context.Context, o order) (int, error) { return o.Qty * 7, nil })
	ship := loom.NewStep("ship", func(_ context.Context, total int) (string, error) { return "shipped", nil })
	return loom.NewFlow("order", func(ctx *loom.Context, o order) (map[string]any, error) {
		total, err := loom.Run(ctx, price, o)
		if err != nil {
			return nil, err
		}
		a, err := loom.Suspend[approval](ctx, "approve")
		if err != nil {
			return nil, err
		}
		if !a.Approved {
			return map[string]any{"total": total, "status": "rejected"}, nil
		}
		s, err := loom.Run(ctx, ship, total)
		return map[string]any{"total": total, "status": s}, err
	}, loom.WithResumeSchema("approve", approveSchema))
}

// blockerFlow runs one step that waits until release is closed.
func blockerFlow(release <-chan struct{}) *loom.Flow {
	wait := loom.NewStep("wait", func(ctx context.Context, _ struct{}) (bool, error) {
		select {
		case <-release:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
	return loom.NewFlow("blocker", func(ctx *loom.Context, _ struct{}) (bool, error) {
		return loom.Run(ctx, wait, struct{}{})
	})
}

// principalAuth is a ResumeAuthenticator that records the wire principal as
// the approver (APPROVAL_GRANTED).
type principalAuth struct{}

func (principalAuth) Authenticate(ctx context.Context, _ string, _ loom.ResumeEvent) (json.RawMessage, error) {
	p := wire.PrincipalFrom(ctx)
	if p == nil {
		return nil, errors.New("no wire principal")
	}
	return json.Marshal(p)
}

// recordingAuthorizer denies cancel of "locked" and remembers the principals
// it saw.
type recordingAuthorizer struct {
	mu   sync.Mutex
	seen []any
}

func (a *recordingAuthorizer) Authorize(_ context.Context, req loom.AuthzRequest) error {
	a.mu.Lock()
	a.seen = append(a.seen, req.Principal)
	a.mu.Unlock()
	if req.Action == "cancel" && req.ExecutionID == "locked" {
		return errors.New("locked executions cannot be cancelled")
	}
	return nil
}

func (a *recordingAuthorizer) principals() []any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]any(nil), a.seen...)
}

// env is a runtime over memory stores served by the wire handler.
type env struct {
	srv     *httptest.Server
	rt      *loom.Runtime
	events  *memstore.EventStore
	authz   *recordingAuthorizer
	release chan struct{}
}

func newEnv(t *testing.T, tweak func(*wire.Options)) *env {
	t.Helper()
	e := &env{events: memstore.NewEventStore(), authz: &recordingAuthorizer{}, release: make(chan struct{})}
	rt, err := loom.New(loom.Config{Events: e.events, Snapshots: memstore.NewSnapshotStore(),
		Flows: []*loom.Flow{orderFlow(), blockerFlow(e.release)}, ResumeAuthenticator: principalAuth{}, Authorizer: e.authz})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	opts := wire.Options{Events: e.events, Authenticate: wire.BearerToken(token, ann)}
	if tweak != nil {
		tweak(&opts)
	}
	h, err := wire.Handler(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
		e.srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// post sends a raw body with the test token and returns status and body.
func (e *env) post(t *testing.T, body string) (int, string) {
	t.Helper()
	return e.postAs(t, token, body)
}

func (e *env) postAs(t *testing.T, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+wire.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// rpc posts a request and decodes the response into a generic map, failing
// on anything but HTTP 200.
func (e *env) rpc(t *testing.T, body string) map[string]any {
	t.Helper()
	status, out := e.post(t, body)
	if status != http.StatusOK {
		t.Fatalf("HTTP %d for %s: %s", status, body, out)
	}
	return decode(t, out)
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	return m
}

// errCode returns the JSON-RPC error code of a response, failing without one.
func errCode(t *testing.T, resp map[string]any) int {
	t.Helper()
	e, ok := resp["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %v", resp)
	}
	n, err := e["code"].(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func result(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	r, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result object in %v", resp)
	}
	return r
}

// stateOf decodes the canonical state in a result.
func stateOf(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	s, ok := r["state"].(map[string]any)
	if !ok {
		t.Fatalf("no state in %v", r)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
