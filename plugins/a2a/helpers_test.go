package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// liveness bounds every wait of a test; nothing is timed.
const liveness = 60 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	t.Cleanup(cancel)
	return ctx
}

// newRuntime builds a runtime over stores with flows and, when effects is
// set, those effects registered.
func newRuntime(t *testing.T, stores store.Set, effects map[string]effect.Func, flows ...*loom.Flow) *loom.Runtime {
	t.Helper()
	cfg := loom.Config{Storage: stores, Flows: flows, Durability: loom.StepDurable}
	cfg.Recovery.Disabled = true
	if effects != nil {
		reg, err := effect.NewRegistry(effects)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Effects = reg
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// tokens maps bearer tokens to callers.
var tokens = map[string]a2a.Caller{
	"alice-token": {ID: "alice"},
	"bob-token":   {ID: "bob"},
}

// errNoToken is the test authenticator's refusal.
var errNoToken = errors.New("token unknown to the test")

func bearerAuth(r *http.Request) (a2a.Caller, error) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	c, ok := tokens[tok]
	if !strings.EqualFold(scheme, "Bearer") || !ok {
		return a2a.Caller{}, errNoToken
	}
	return c, nil
}

func allowAll(context.Context, a2a.Caller, string) error { return nil }

// approval is the answer to the approve gate.
type approval struct {
	OK bool `json:"ok"`
}

const approvalSchema = `{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}},"additionalProperties":false}`

// echoFlow answers its input at once.
func echoFlow() *loom.Flow {
	return loom.NewFlow("echo", func(ctx *loom.Context, in string) (string, error) { return "echo: " + in, nil })
}

// approveFlow parks on the gate "approve" until an approval answers it.
func approveFlow() *loom.Flow {
	return loom.NewFlow("approve", func(ctx *loom.Context, in string) (string, error) {
		a, err := loom.Suspend[approval](ctx, "approve")
		if err != nil {
			return "", err
		}
		if a.OK {
			return "approved " + in, nil
		}
		return "rejected " + in, nil
	}, loom.WithResumeSchema("approve", approvalSchema))
}

// published is a Server publishing echo and approve, on loopback.
type published struct {
	stores store.Set
	rt     *loom.Runtime
	url    string
}

func publish(t *testing.T, mod func(*a2a.ServerOptions)) *published {
	t.Helper()
	return serve(t, []*loom.Flow{echoFlow(), approveFlow()}, func(o *a2a.ServerOptions) {
		o.Agents = []a2a.PublishedAgent{
			{Name: "echo", Description: "Echoes its input.", FlowID: "echo"},
			{Name: "approver", Description: "Waits for an approval.", FlowID: "approve"},
		}
		if mod != nil {
			mod(o)
		}
	})
}

// publishFlows publishes each flow as an agent named after it.
func publishFlows(t *testing.T, settle time.Duration, flows ...*loom.Flow) *published {
	t.Helper()
	return serve(t, flows, func(o *a2a.ServerOptions) {
		for _, f := range flows {
			o.Agents = append(o.Agents, a2a.PublishedAgent{Name: f.ID, FlowID: f.ID})
		}
		o.SettleTimeout = settle
	})
}

func serve(t *testing.T, flows []*loom.Flow, mod func(*a2a.ServerOptions)) *published {
	t.Helper()
	stores := memstore.NewSet()
	rt := newRuntime(t, stores, nil, flows...)
	opts := a2a.ServerOptions{Authenticate: bearerAuth, Authorize: allowAll}
	mod(&opts)
	srv, err := a2a.NewServer(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &published{stores: stores, rt: rt, url: ts.URL}
}

// bearer is an http.RoundTripper adding a token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// sdkClient is the SDK's own client of agent at base, sending token.
func sdkClient(t *testing.T, base, token string) *a2aclient.Client {
	t.Helper()
	ctx := testContext(t)
	hc := &http.Client{Transport: bearer{token}}
	card, err := (&agentcard.Resolver{Client: hc}).Resolve(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// sendText sends text to c (continuing taskID when set) and returns the
// task it answers.
func sendText(ctx context.Context, c *a2aclient.Client, taskID protocol.TaskID, parts ...*protocol.Part) (*protocol.Task, error) {
	msg := protocol.NewMessage(protocol.MessageRoleUser, parts...)
	msg.TaskID = taskID
	res, err := c.SendMessage(ctx, &protocol.SendMessageRequest{Message: msg})
	if err != nil {
		return nil, err
	}
	task, ok := res.(*protocol.Task)
	if !ok {
		return nil, errors.New("the agent answered with a message, not a task")
	}
	return task, nil
}

// logCounts is every execution of stores with its event count: what a
// refusal must leave unchanged.
func logCounts(t *testing.T, stores store.Set) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	after := ""
	for {
		page, err := stores.Events.ListExecutions(ctx, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			evs, err := stores.Events.ReadFrom(ctx, x.ExecutionID, 0)
			if err != nil {
				t.Fatal(err)
			}
			out[x.ExecutionID] = len(evs)
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func artifactText(task *protocol.Task) string {
	var texts []string
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			texts = append(texts, p.Text())
		}
	}
	return strings.Join(texts, "\n")
}

func containsWord(s, w string) bool { return w != "" && strings.Contains(s, w) }

func splitHost(addr string) (string, string, error) { return net.SplitHostPort(addr) }

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

// remoteListener is a listener whose address is not loopback; it never
// accepts.
type remoteListener struct{}

func (remoteListener) Accept() (net.Conn, error) { return nil, errors.New("never accepts") }
func (remoteListener) Close() error              { return nil }
func (remoteListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 80}
}
