package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	protocol "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/event"
	"github.com/loom-kernel/loom/fold"
	"github.com/loom-kernel/loom/internal/crashtest"
	"github.com/loom-kernel/loom/llm"
	"github.com/loom-kernel/loom/llm/llmtest"
	a2a "github.com/loom-kernel/loom/plugins/a2a"
	"github.com/loom-kernel/loom/plugins/mcp"
	"github.com/loom-kernel/loom/store"
	"github.com/loom-kernel/loom/store/memstore"
)

// The interop test: an agent on a cassette model calls an MCP
// tool (an official-SDK server) and an A2A peer (an official-SDK server)
// in one turn, and is killed after every append and recovered. Each
// remote call whose outcome was durable is never made again.

// tally counts the remote calls: the outside world, which outlives every
// runtime.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(k string) { t.mu.Lock(); t.n[k]++; t.mu.Unlock() }
func (t *tally) get(k string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[k]
}

// oracle is an A2A executor that answers at once.
type oracle struct{ calls *tally }

func (o oracle) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[protocol.Event, error] {
	o.calls.add("a2a")
	return func(yield func(protocol.Event, error) bool) {
		if !yield(protocol.NewArtifactEvent(ec, protocol.NewTextPart("the deploy at 14:02")), nil) {
			return
		}
		yield(protocol.NewStatusUpdateEvent(ec, protocol.TaskStateCompleted, nil), nil)
	}
}

func (o oracle) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[protocol.Event, error] {
	return func(yield func(protocol.Event, error) bool) {
		yield(protocol.NewStatusUpdateEvent(ec, protocol.TaskStateCanceled, nil), nil)
	}
}

// remotes starts the two servers on loopback and returns their URLs.
func remotes(t *testing.T, calls *tally) (mcpURL, a2aURL string) {
	t.Helper()
	ms := sdk.NewServer(&sdk.Implementation{Name: "runbooks", Version: "v1"}, nil)
	sdk.AddTool(ms, &sdk.Tool{Name: "lookup", Description: "Look a runbook up."},
		func(_ context.Context, _ *sdk.CallToolRequest, in struct {
			Service string `json:"service"`
		}) (*sdk.CallToolResult, any, error) {
			calls.add("mcp")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "roll back " + in.Service}}}, nil, nil
		})
	mt := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return ms }, nil))
	t.Cleanup(mt.Close)

	mux := http.NewServeMux()
	at := httptest.NewServer(mux)
	t.Cleanup(at.Close)
	card := &protocol.AgentCard{Name: "oracle", Description: "Knows what changed.", Version: "1",
		SupportedInterfaces: []*protocol.AgentInterface{protocol.NewAgentInterface(at.URL+"/invoke", protocol.TransportProtocolJSONRPC)}}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(oracle{calls: calls})))
	return mt.URL, at.URL
}

// volatileIDs are the remote task's ids in a tool result: new on every
// call, so scrubbed before a request is digested.
var volatileIDs = regexp.MustCompile(`"(taskId|contextId|messageId)":"[^"]*"`)

func scrubIDs(r llm.Request) llm.Request {
	for i := range r.Messages {
		for j := range r.Messages[i].ToolResults {
			tr := &r.Messages[i].ToolResults[j]
			tr.Content = volatileIDs.ReplaceAllString(tr.Content, `"$1":"*"`)
		}
	}
	return r
}

// interopProcess is one process: a runtime over stores whose agent asks
// model and reaches both remotes through fresh connections.
func interopProcess(t *testing.T, stores store.Set, model llm.Provider, mcpURL, a2aURL string) *loom.Runtime {
	t.Helper()
	ctx := context.Background()
	client, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "runbooks", URL: mcpURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	tools, err := client.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := a2a.Discover(ctx, a2aURL, a2a.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	effects := mcp.Effects(client)
	for k, v := range a2a.Effects(peer) { //loom:order-independent map into map
		effects[k] = v
	}
	reg, err := effect.NewRegistry(effects)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{ID: "triage", Provider: model, Model: "claude-sonnet-4-5",
		Tools: append(mcp.AgentTools(tools), a2a.AgentTool(peer))}
	flow := loom.NewFlow("triage", func(ctx *loom.Context, q string) (string, error) {
		r, err := agent.Run(ctx, cfg, llm.UserText(q))
		return r.Text, err
	})
	rcfg := loom.Config{Storage: stores, Flows: []*loom.Flow{flow}, Effects: reg, Durability: loom.StepDurable}
	rcfg.Recovery.Disabled = true
	rt, err := loom.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func completed(log []event.Envelope, kind string) bool {
	for _, e := range log {
		var p struct {
			StepID string `json:"stepId"`
		}
		if e.Type == event.StepCompleted && json.Unmarshal(e.Payload, &p) == nil && p.StepID == kind {
			return true
		}
	}
	return false
}

func TestAgentOnMCPAndA2ACrashMatrix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a liveness bound
	defer cancel()
	calls := &tally{n: map[string]int{}}
	mcpURL, a2aURL := remotes(t, calls)

	// The reference run records the cassette from a scripted model.
	path := filepath.Join(t.TempDir(), "interop.json")
	scripted := llmtest.NewProvider(t, "anthropic")
	rec, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Record, Provider: scripted, ScrubRequest: scrubIDs})
	if err != nil {
		t.Fatal(err)
	}
	refStores := store.Set{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore()}
	rt := interopProcess(t, refStores, rec, mcpURL, a2aURL)
	scripted.Enqueue(llmtest.Calls(50, 10, "runbooks_lookup", `{"service":"checkout"}`, "oracle", `{"message":"what changed on checkout?"}`),
		llmtest.Text("Roll back checkout: the 14:02 deploy broke it.", 90, 12))
	id, err := rt.Start(ctx, "triage", "checkout is slow", loom.WithExecutionID("interop"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := rt.WaitForCompletion(ctx, id)
	_ = rt.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(); err != nil {
		t.Fatal(err)
	}
	refLog, _ := store.Read(ctx, refStores.Events, id)
	if calls.get("mcp") != 1 || calls.get("a2a") != 1 {
		t.Fatalf("the reference run made %d MCP and %d A2A calls, want 1 each", calls.get("mcp"), calls.get("a2a"))
	}

	const mcpStep, a2aStep = "triage/turn:1/tool:0", "triage/turn:1/tool:1"
	for n := 1; n < len(refLog); n++ {
		t.Run(fmt.Sprintf("kill-after-%02d", n), func(t *testing.T) {
			model, err := llm.OpenCassette(path, llm.CassetteOptions{Mode: llm.Replay, ScrubRequest: scrubIDs})
			if err != nil {
				t.Fatal(err)
			}
			stores := store.Set{Events: memstore.NewEventStore(), Snapshots: memstore.NewSnapshotStore()}
			fault := crashtest.NewFaultStore(stores.Events)
			fault.KillAfter(n)
			a := interopProcess(t, store.Set{Events: fault, Snapshots: stores.Snapshots}, model, mcpURL, a2aURL)
			if _, err := a.Start(ctx, "triage", "checkout is slow", loom.WithExecutionID("interop")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-fault.Killed():
			case <-ctx.Done():
				t.Fatal("process A neither died nor ended")
			}
			_ = a.Close()
			crashed, _ := store.Read(ctx, stores.Events, "interop")
			before := map[string]int{"mcp": calls.get("mcp"), "a2a": calls.get("a2a")}

			b := interopProcess(t, stores, model, mcpURL, a2aURL)
			defer b.Close()
			if _, err := b.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := b.WaitForCompletion(ctx, "interop")
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != fold.StatusCompleted || string(res.Output) != string(ref.Output) {
				t.Fatalf("recovered %s %s, want %s", res.Status, res.Output, ref.Output)
			}
			for step, kind := range map[string]string{mcpStep: "mcp", a2aStep: "a2a"} { //loom:order-independent each on its own
				if completed(crashed, step) && calls.get(kind) != before[kind] {
					t.Errorf("the %s call's outcome was durable before the crash, and process B called it again", kind)
				}
			}
		})
	}
}
