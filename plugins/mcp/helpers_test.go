package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/plugins/mcp"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The environment that turns the test binary into a stdio MCP server.
const (
	envStdio  = "LOOM_MCP_TEST_STDIO"
	envCounts = "LOOM_MCP_TEST_COUNTS"
)

// TestMain re-executes as the stdio test server when envStdio is set.
func TestMain(m *testing.M) {
	if os.Getenv(envStdio) == "1" {
		w := &fileCounter{path: os.Getenv(envCounts)}
		if err := newServer(w, nil).Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// counter is where the test server counts its tool calls: the outside
// world, which outlives every runtime.
type counter interface{ add(tool string) }

// listings is the count of tools/list requests a server answered.
const listings = "tools/list"

// world counts an in-process server's calls and the credentials it saw.
type world struct {
	mu    sync.Mutex
	calls map[string]int
	auth  []string
}

func newWorld() *world { return &world{calls: map[string]int{}} }

func (w *world) add(tool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[tool]++
}

func (w *world) count(tool string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[tool]
}

// total is the number of tool calls the server ran.
func (w *world) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for tool, c := range w.calls { //loom:order-independent a sum
		if tool != listings {
			n += c
		}
	}
	return n
}

func (w *world) authHeaders() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.auth...)
}

// fileCounter counts a subprocess server's calls as lines of a file, read
// back by the test process.
type fileCounter struct {
	mu   sync.Mutex
	path string
}

func (f *fileCounter) add(tool string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	_, werr := file.WriteString(tool + "\n")
	if err := errors.Join(werr, file.Close()); err != nil {
		panic(err)
	}
}

func (f *fileCounter) count(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.Open(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		panic(err)
	}
	defer file.Close()
	n := 0
	for s := bufio.NewScanner(file); s.Scan(); {
		if s.Text() == tool {
			n++
		}
	}
	return n
}

type echoIn struct {
	Text string `json:"text"`
}

type addIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addOut struct {
	Sum int `json:"sum"`
}

// newServer is the test MCP server, on the official SDK: echo answers
// text, add answers structured content, fail answers isError.
func newServer(w counter, opts *sdk.ServerOptions) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "v1"}, opts)
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				w.add(listings)
			}
			return next(ctx, method, req)
		}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			w.add("echo")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Add two numbers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
			w.add("add")
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			w.add("fail")
			return nil, nil, errors.New("the disk is full")
		})
	return s
}

// serveHTTP serves s over streamable HTTP on loopback, recording every
// request's Authorization header into w.
func serveHTTP(t testing.TB, s *sdk.Server, w *world) string {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.auth = append(w.auth, r.Header.Get("Authorization"))
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// stdioConfig runs this test binary as a stdio server counting into a
// fresh file.
func stdioConfig(t testing.TB, name string) (mcp.ServerConfig, *fileCounter) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	counts := filepath.Join(t.TempDir(), "calls")
	return mcp.ServerConfig{Name: name, Command: []string{exe, "-test.run=^$"},
		Env: []string{envStdio + "=1", envCounts + "=" + counts}}, &fileCounter{path: counts}
}

// connect connects and closes the client when t ends.
func connect(t testing.TB, cfg mcp.ServerConfig) *mcp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a liveness bound
	defer cancel()
	c, err := mcp.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// listed lists c's tools by name.
func listed(t testing.TB, c *mcp.Client) map[string]mcp.Tool {
	t.Helper()
	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	return byName
}

// newRuntime is one process over stores, with the mcp.invoke effect over
// clients.
func newRuntime(t testing.TB, stores store.Set, flows []*loom.Flow, mod func(*loom.Config), clients ...*mcp.Client) *loom.Runtime {
	t.Helper()
	reg, err := effect.NewRegistry(mcp.Effects(clients...))
	if err != nil {
		t.Fatal(err)
	}
	cfg := loom.Config{Storage: stores, Flows: flows, Effects: reg, Durability: loom.StepDurable}
	cfg.Recovery.Disabled = true
	if mod != nil {
		mod(&cfg)
	}
	rt, err := loom.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func newStores() store.Set { return memstore.NewSet() }

func readLog(t testing.TB, stores store.Set, id string) []event.Envelope {
	t.Helper()
	evs, err := store.Read(context.Background(), stores.Events, id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// stepEvents returns the events of typ whose payload's stepId is step.
func stepEvents(evs []event.Envelope, typ, step string) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		var p map[string]json.RawMessage
		_ = json.Unmarshal(e.Payload, &p)
		var id string
		_ = json.Unmarshal(p["stepId"], &id)
		if id == step {
			out = append(out, p)
		}
	}
	return out
}

func countType(evs []event.Envelope, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// logHolds reports whether any event of evs carries s anywhere.
func logHolds(evs []event.Envelope, s string) bool {
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil || strings.Contains(string(b), s) || strings.Contains(string(e.Payload), s) {
			return true
		}
		for _, v := range e.Metadata { //loom:order-independent any match
			if strings.Contains(string(v), s) {
				return true
			}
		}
	}
	return false
}

func liveness(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a liveness bound
	t.Cleanup(cancel)
	return ctx
}
