package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/effect"
	"github.com/loom-kernel/loom/plugins/mcp"
)

// The runbook server: an MCP server, built on the official SDK, that every
// incident process starts in-process on loopback and reaches through Loom's
// MCP client (plugins/mcp). Its one tool, lookup, answers the team's
// runbook for a cause. The planner calls it as runbooks_lookup; the call
// runs through the mcp.invoke effect, is recorded under the tool id
// mcp.invoke:runbooks/lookup, and a replay in another process serves it
// from the log without asking that process's server. What the tool
// answers is a pure function of its arguments, so the demo stays
// deterministic (and its cassette valid) whichever process asks.

// The runbook server's identity, as the client and the log name it.
const (
	runbookServer = "runbooks"
	runbookTool   = "lookup"
)

// runbookToolName is the name the model calls the lookup by.
var runbookToolName = mcp.ModelName(mcp.Tool{Server: runbookServer, Name: runbookTool})

// runbookToolID is the tool id a lookup is recorded (and granted) under.
var runbookToolID = mcp.ToolID(runbookServer, runbookTool)

// lookupArgs are the lookup tool's arguments. (The SDK derives the input
// schema: a jsonschema tag is a field's description.)
type lookupArgs struct {
	Service string `json:"service" jsonschema:"the affected service, as the incident names it"`
	Cause   string `json:"cause" jsonschema:"the suspect the diagnoses point at: deploy, saturation, memory or none"`
}

// Runbook is what lookup answers: the team's procedure for one cause.
type Runbook struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Service string `json:"service"`
	Cause   string `json:"cause"`
	// Variant is the plan variant (of propose_fix's) the runbook applies.
	Variant string   `json:"variant"`
	Steps   []string `json:"steps"`
}

// runbookFor is the runbook of cause on service: a pure function, so any
// process answers a recorded call the same. The text is plain ASCII, so the
// tool's JSON is the same bytes whoever encodes it (see canonicalTool).
func runbookFor(service, cause string) Runbook {
	switch cause {
	case "deploy":
		return Runbook{ID: "RB-101", Title: "Latency after a deploy", Service: service, Cause: cause, Variant: "rollback", Steps: []string{
			"confirm the onset follows the rollout",
			"roll " + service + " back to the previous version",
			"watch p99 and the error rate for 10 minutes",
			"open a ticket against the release",
		}}
	case "saturation":
		return Runbook{ID: "RB-102", Title: "Connection pool exhausted", Service: service, Cause: cause, Variant: "scale-out", Steps: []string{
			"compare the pool in use with its size",
			"double the " + service + " connection pool and add replicas",
			"look for slow queries holding connections",
		}}
	case "memory":
		return Runbook{ID: "RB-103", Title: "Containers OOM-killed", Service: service, Cause: cause, Variant: "restart", Steps: []string{
			"confirm OOMKilled in the pod events",
			"restart the " + service + " pods one at a time with a higher memory limit",
			"take a heap profile before the next OOM",
		}}
	}
	return Runbook{ID: "RB-100", Title: "Cause unknown", Service: service, Cause: cause, Variant: "restart", Steps: []string{
		"page the owner of " + service,
		"restart the " + service + " pods one at a time",
	}}
}

// runbookHeaderTimeout bounds how long the runbook server waits for a
// request's headers.
const runbookHeaderTimeout = 5 * time.Second

// runbooks is one process's runbook server and the MCP client connected to
// it. The tools are listed (and their schemas pinned) once, at start: the
// planner of every incident this process drives offers them.
type runbooks struct {
	srv     *http.Server
	served  chan error // what http.Server.Serve returned
	http    *http.Client
	client  *mcp.Client
	tools   []mcp.Tool
	lookups atomic.Int64 // lookup calls this process's server answered

	closeOnce sync.Once
	closeErr  error
}

// startRunbooks starts the runbook server on 127.0.0.1:0, connects to it
// with plugins/mcp and lists its tools. On an error nothing is left
// running.
func startRunbooks(ctx context.Context) (_ *runbooks, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the runbook server: %w", err)
	}
	rb := &runbooks{served: make(chan error, 1), http: &http.Client{Transport: &http.Transport{}}}
	s := sdk.NewServer(&sdk.Implementation{Name: runbookServer, Version: "v1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: runbookTool, Description: "Look up the team's runbook for a cause of an incident on a service: its steps, and the plan variant it applies."},
		func(_ context.Context, _ *sdk.CallToolRequest, in lookupArgs) (*sdk.CallToolResult, Runbook, error) {
			rb.lookups.Add(1)
			return nil, runbookFor(in.Service, in.Cause), nil
		})
	rb.srv = &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil),
		ReadHeaderTimeout: runbookHeaderTimeout}
	go func() { rb.served <- rb.srv.Serve(ln) }()
	defer func() {
		if err != nil {
			err = errors.Join(err, rb.close())
		}
	}()
	url := "http://" + ln.Addr().String()
	if rb.client, err = mcp.Connect(ctx, mcp.ServerConfig{Name: runbookServer, URL: url, HTTPClient: rb.http}); err != nil {
		return rb, err
	}
	if rb.tools, err = rb.client.Tools(ctx); err != nil {
		return rb, err
	}
	return rb, nil
}

// agentTools are the server's tools as the planner offers them: read-only
// (a lookup changes nothing, so it runs for real in a simulated fork).
func (rb *runbooks) agentTools() []*agent.Tool {
	return mcp.AgentTools(rb.tools, agent.ReadOnly())
}

// effects is the registry of a runtime whose planner offers rb's tools:
// the mcp.invoke effect over rb's client, counting each call it runs under
// its step id in fx (a call the log serves never reaches it).
func (rb *runbooks) effects(fx *effectCounter) (*effect.Registry, error) {
	effects := mcp.Effects(rb.client)
	invoke := effects[mcp.EffectName]
	effects[mcp.EffectName] = func(ec *effect.Context, in json.RawMessage) (json.RawMessage, error) {
		fx.ran(ec.StepID)
		return invoke(ec, in)
	}
	return effect.NewRegistry(effects)
}

// wire registers the remediation flow over m, reporting to fx, and the
// effects of rb's tools into cfg: what one process runs.
func (rb *runbooks) wire(cfg *loom.Config, fx *effectCounter, m model) error {
	reg, err := rb.effects(fx)
	if err != nil {
		return err
	}
	cfg.Flows, cfg.Effects = []*loom.Flow{newRemediateFlow(fx, m, rb)}, reg
	return nil
}

// answered is how many lookups this process's server answered.
func (rb *runbooks) answered() int { return int(rb.lookups.Load()) }

// close ends the client's session, then the server and its connections
// (the session's end left none in use). A second close reports the first's
// result.
func (rb *runbooks) close() error {
	rb.closeOnce.Do(func() { rb.closeErr = rb.shutdown() })
	return rb.closeErr
}

// shutdown is close, once.
func (rb *runbooks) shutdown() error {
	var errs []error
	if rb.client != nil {
		errs = append(errs, rb.client.Close())
	}
	errs = append(errs, rb.srv.Close())
	if err := <-rb.served; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	rb.http.CloseIdleConnections()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing the runbook server: %w", err)
	}
	return nil
}
