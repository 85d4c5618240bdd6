package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/plugins/mcp/mcpserver"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveness bounds every test's wait: a hang fails instead of stalling.
const liveness = 30 * time.Second

type greetIn struct {
	Name string `json:"name"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

type approval struct {
	Approved bool `json:"approved"`
}

const approvalSchema = `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`

// flows are the fixture's flows: one that completes, one that parks on the
// "approval" gate, one that fails, one kept for admins, one that runs the
// "echo" effect, and one no tool exposes.
func flows() []*loom.Flow {
	return []*loom.Flow{
		loom.NewFlow("greet", func(ctx *loom.Context, in greetIn) (greetOut, error) {
			return greetOut{Greeting: "hello " + in.Name}, nil
		}),
		loom.NewFlow("approve", func(ctx *loom.Context, in greetIn) (map[string]any, error) {
			a, err := loom.Suspend[approval](ctx, "approval")
			if err != nil {
				return nil, err
			}
			return map[string]any{"name": in.Name, "approved": a.Approved}, nil
		}, loom.WithResumeSchema("approval", approvalSchema)),
		loom.NewFlow("boom", func(ctx *loom.Context, in greetIn) (greetOut, error) {
			return greetOut{}, errors.New("boom")
		}),
		loom.NewFlow("report", func(ctx *loom.Context, in greetIn) (string, error) { return "secret report", nil }),
		mcpserver.EffectFlow("echo-flow", "echo"),
		// hidden parks like approve but is exposed by no tool.
		loom.NewFlow("hidden", func(ctx *loom.Context, in greetIn) (approval, error) {
			return loom.Suspend[approval](ctx, "approval")
		}),
	}
}

// tools exposes the fixture's flows; "report" only to the admins audience.
func tools() []mcpserver.FlowTool {
	return []mcpserver.FlowTool{
		{Name: "greet", FlowID: "greet", Description: "Greets someone.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)},
		{Name: "approve", FlowID: "approve"},
		{Name: "boom", FlowID: "boom"},
		{Name: "admin.report", FlowID: "report", Audiences: []string{"admins"}},
		{Name: "echo", FlowID: "echo-flow"},
	}
}

// callers are the fixture's bearer tokens: alice is an admin, bob is not,
// carol is authenticated but the authorizer refuses her every call.
var callers = map[string]mcpserver.Caller{
	"tok-alice": {ID: "alice", Audiences: []string{"admins"}},
	"tok-bob":   {ID: "bob"},
	"tok-carol": {ID: "carol"},
	// alice of another tenant is another principal.
	"tok-alice-t2": {ID: "alice", Tenant: "t2", Audiences: []string{"admins"}},
}

func authenticate(r *http.Request) (mcpserver.Caller, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c, known := callers[tok]
	if !ok || !known {
		return mcpserver.Caller{}, mcpserver.ErrUnauthenticated
	}
	return c, nil
}

var errCarol = errors.New("carol may not call tools")

func authorize(ctx context.Context, c mcpserver.Caller, tool string) error {
	if c.ID == "carol" {
		return errCarol
	}
	return nil
}

// fixture is a runtime over memory stores served on loopback.
type fixture struct {
	t      *testing.T
	stores store.Set
	rt     *loom.Runtime
	url    string
	echoes *atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, stores: memstore.NewSet(), echoes: new(atomic.Int64)}
	reg, err := effect.NewRegistry(map[string]effect.Func{"echo": func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		f.echoes.Add(1)
		return in, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Storage: f.stores, Flows: flows(), Effects: reg, Durability: loom.StepDurable}
	cfg.Recovery.Disabled = true
	f.rt, err = loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.Close() })
	srv, err := mcpserver.New(f.rt, mcpserver.Options{Name: "loom-test", Version: "1.2.3", Tools: tools(),
		Authenticate: authenticate, Authorize: authorize})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL
	return f
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect is an official SDK client session to url with token ("" sends
// none).
func connect(ctx context.Context, url, token string) (*sdk.ClientSession, error) {
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	if token == "" {
		hc = http.DefaultClient
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test-host", Version: "0.1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

func (f *fixture) session(token string) *sdk.ClientSession {
	f.t.Helper()
	cs, err := connect(f.ctx(), f.url, token)
	if err != nil {
		f.t.Fatalf("connect as %s: %v", token, err)
	}
	f.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (f *fixture) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	f.t.Cleanup(cancel)
	return ctx
}

// call calls a tool and decodes its Outcome, checking the structured
// content says the same as the text.
func (f *fixture) call(cs *sdk.ClientSession, tool string, args any) (mcpserver.Outcome, bool) {
	f.t.Helper()
	res, err := cs.CallTool(f.ctx(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		f.t.Fatalf("call %s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		f.t.Fatalf("call %s: %d content blocks, want 1", tool, len(res.Content))
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		f.t.Fatalf("call %s: content %T, want text", tool, res.Content[0])
	}
	var o, structured mcpserver.Outcome
	if err := json.Unmarshal([]byte(text.Text), &o); err != nil {
		f.t.Fatalf("call %s: text %q: %v", tool, text.Text, err)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, &structured)
	}
	if err != nil || structured.Status != o.Status || structured.ExecutionID != o.ExecutionID {
		f.t.Fatalf("call %s: structured content %s disagrees with text %s (%v)", tool, raw, text.Text, err)
	}
	return o, res.IsError
}

// events is the number of events execution id has in the store.
func (f *fixture) events(id string) int {
	f.t.Helper()
	evs, err := f.stores.Events.ReadFrom(context.Background(), id, 0)
	if err != nil {
		f.t.Fatalf("read %s: %v", id, err)
	}
	return len(evs)
}

// executions is the number of executions in the store.
func (f *fixture) executions() int {
	f.t.Helper()
	page, err := f.stores.Events.ListExecutions(context.Background(), "", 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(page.Executions)
}
