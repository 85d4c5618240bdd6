package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/loom-kernel/loom"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResumeToolName is the tool every caller sees beside the flow tools: it
// answers the gate an execution this caller started is parked on. No flow
// tool may take the name.
const ResumeToolName = "resume"

// MaxToolNameLength bounds a tool name, as the MCP specification does.
const MaxToolNameLength = 128

// Caller is the principal Options.Authenticate verified for one HTTP
// request. ID is required (an empty one is refused as unauthenticated);
// ID and Tenant are recorded as the loom.Principal of every execution the
// caller starts, and only that principal may resume it. Audiences say which
// FlowTools the caller may see and call.
type Caller struct {
	ID        string
	Tenant    string
	Audiences []string
}

// principal is the caller as the runtime records it.
func (c Caller) principal() loom.Principal { return loom.Principal{ID: c.ID, Tenant: c.Tenant} }

// FlowTool exposes one registered flow as an MCP tool. A call starts the
// flow with the tool's arguments (a JSON object) as its input.
type FlowTool struct {
	// Name is the tool's name: 1 to MaxToolNameLength characters from
	// [A-Za-z0-9_.-], unique, and not ResumeToolName.
	Name string
	// Description tells the host's model what the tool does; empty takes
	// "Runs the loom flow <FlowID>.".
	Description string
	// FlowID names a flow registered on the runtime (loom.Runtime.Flows).
	FlowID string
	// InputSchema is the JSON Schema of the arguments, an object schema of
	// type "object"; empty takes {"type":"object"}. The flow itself still
	// refuses an input its body cannot decode, before anything is appended.
	InputSchema json.RawMessage
	// Audiences are who may see and call the tool: a caller with at least
	// one of them. Empty lets every authenticated caller in.
	Audiences []string
}

// Options configures New. The defaults: Name "loom", Version "dev", no
// tools but resume, no Authenticate and no Authorize (refused unless
// Insecure), loopback addresses only for Listen.
type Options struct {
	// Name and Version are the implementation the server reports on
	// initialize.
	Name, Version string
	// Tools are the flows exposed, listed in this order.
	Tools []FlowTool
	// Authenticate verifies every HTTP request before anything else reads
	// it. An error (or a Caller without an ID) is answered 401 with a
	// WWW-Authenticate header; the error's text never reaches the client.
	Authenticate func(r *http.Request) (Caller, error)
	// Authorize is asked before every tool call (the flow tool's name, or
	// ResumeToolName) and before anything starts or is resumed; an error
	// refuses the call with *ToolDeniedError as an isError result.
	Authorize func(ctx context.Context, c Caller, tool string) error
	// Insecure allows a server without Authenticate or Authorize: a missing
	// Authenticate admits every request as the caller "anonymous" with no
	// audiences, a missing Authorize allows every call. For local
	// development and tests.
	Insecure bool
	// AllowNonLoopback lets Listen bind an address that is not loopback.
	AllowNonLoopback bool
}

// Server serves a runtime's chosen flows as MCP tools over streamable
// HTTP. Build it with New; it is safe for concurrent use.
type Server struct {
	rt      *loom.Runtime
	opts    Options
	tools   []*exposedTool
	byFlow  map[string]*exposedTool // by flow id (the first tool exposing it)
	resume  *sdk.Tool
	handler http.Handler
}

// exposedTool is a validated FlowTool with what a call needs.
type exposedTool struct {
	FlowTool
	tool    *sdk.Tool
	schemas map[string]json.RawMessage // the flow's resume schemas by gate
}

// New builds a server over rt. It refuses, with nothing served, a missing
// Authenticate or Authorize without Insecure (*InsecureConfigError) and a
// bad tool declaration (*ToolConfigError).
func New(rt *loom.Runtime, opts Options) (*Server, error) {
	if rt == nil {
		return nil, fmt.Errorf("mcpserver: a runtime is required")
	}
	if !opts.Insecure {
		var missing []string
		if opts.Authenticate == nil {
			missing = append(missing, "Authenticate")
		}
		if opts.Authorize == nil {
			missing = append(missing, "Authorize")
		}
		if len(missing) > 0 {
			return nil, &InsecureConfigError{Missing: missing}
		}
	}
	if opts.Name == "" {
		opts.Name = "loom"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{rt: rt, opts: opts, byFlow: map[string]*exposedTool{}, resume: resumeTool()}
	flows := rt.Flows()
	seen := map[string]bool{}
	for _, t := range opts.Tools {
		x, err := exposeTool(t, flows, seen)
		if err != nil {
			return nil, err
		}
		s.tools = append(s.tools, x)
		if _, dup := s.byFlow[t.FlowID]; !dup {
			s.byFlow[t.FlowID] = x
		}
	}
	s.handler = s.buildHandler()
	return s, nil
}

// exposeTool validates t against the registered flows and the names seen.
func exposeTool(t FlowTool, flows []loom.FlowInfo, seen map[string]bool) (*exposedTool, error) {
	if err := validateToolName(t.Name); err != nil {
		return nil, &ToolConfigError{Tool: t.Name, Problem: err.Error()}
	}
	if t.Name == ResumeToolName {
		return nil, &ToolConfigError{Tool: t.Name, Problem: "the name is reserved for the resume tool"}
	}
	if seen[t.Name] {
		return nil, &ToolConfigError{Tool: t.Name, Problem: "declared twice"}
	}
	seen[t.Name] = true
	i := slices.IndexFunc(flows, func(f loom.FlowInfo) bool { return f.ID == t.FlowID })
	if i < 0 {
		return nil, &ToolConfigError{Tool: t.Name, Problem: fmt.Sprintf("flow %q is not registered on the runtime", t.FlowID), Err: loom.ErrUnknownFlow}
	}
	schema := t.InputSchema
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil || m["type"] != "object" {
		return nil, &ToolConfigError{Tool: t.Name, Problem: `the input schema must be a JSON object schema with "type": "object"`}
	}
	desc := t.Description
	if desc == "" {
		desc = "Runs the loom flow " + t.FlowID + "."
	}
	x := &exposedTool{FlowTool: t, schemas: flows[i].ResumeSchemas}
	x.InputSchema = slices.Clone(schema)
	x.Audiences = slices.Clone(t.Audiences)
	x.tool = &sdk.Tool{Name: t.Name, Description: desc, InputSchema: x.InputSchema}
	return x, nil
}

// validateToolName applies the MCP specification's tool-name rule.
func validateToolName(name string) error {
	if name == "" || len(name) > MaxToolNameLength {
		return fmt.Errorf("a tool name must be 1 to %d characters", MaxToolNameLength)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return fmt.Errorf("a tool name may hold only A-Z, a-z, 0-9, '_', '-' and '.'")
		}
	}
	return nil
}

// visibleTo reports whether c may see and call t.
func (t *exposedTool) visibleTo(c Caller) bool {
	if len(t.Audiences) == 0 {
		return true
	}
	for _, a := range c.Audiences {
		if slices.Contains(t.Audiences, a) {
			return true
		}
	}
	return false
}

// resumeTool describes the resume tool.
func resumeTool() *sdk.Tool {
	return &sdk.Tool{
		Name: ResumeToolName,
		Description: "Answers the gate a flow you started is parked on. Pass the executionId and gate a tool " +
			"answered with status \"suspended\", and a payload satisfying the gate's schema.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"executionId":{"type":"string","description":"the parked execution"},` +
			`"gate":{"type":"string","description":"the gate it is parked on"},` +
			`"payload":{"description":"the answer; it must satisfy the gate's schema"}},` +
			`"required":["executionId","gate"],"additionalProperties":false}`),
	}
}
