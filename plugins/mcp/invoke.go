package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/effect"
)

// EffectName is the one effect every MCP tool call runs through; register
// Effects(...) in loom.Config.Effects. Calls are recorded under the
// qualified id "mcp.invoke:<server>/<tool>" (ToolID).
const EffectName = "mcp.invoke"

// The typed failure channels of an MCP call, and their payload schemas.
const (
	// ChannelToolNotFound: the server no longer lists the tool (payload
	// ToolNotFound).
	ChannelToolNotFound = "toolNotFound"
	// ChannelSchemaDrift: the tool's input schema is not the one pinned
	// when it was listed (payload SchemaDrift).
	ChannelSchemaDrift = "schemaDrift"
	// ChannelToolError: the tool answered with isError; the payload's
	// message is its text content (at most MaxErrorBytes). It is the agent
	// loop's own tool-error channel, so the model is told.
	ChannelToolError = "toolError"

	// ToolNotFoundSchema is the JSON Schema of ToolNotFound.
	ToolNotFoundSchema = `{"type":"object","required":["server","tool"],"properties":{"server":{"type":"string"},"tool":{"type":"string"}}}`
	// SchemaDriftSchema is the JSON Schema of SchemaDrift.
	SchemaDriftSchema = `{"type":"object","required":["server","tool","pinned","current"],"properties":{"server":{"type":"string"},"tool":{"type":"string"},"pinned":{"type":"string"},"current":{"type":"string"}}}`
	// ToolErrorSchema is the JSON Schema of ToolError (the agent loop's
	// own toolError schema).
	ToolErrorSchema = `{"type":"object","required":["message"],"properties":{"message":{"type":"string"}}}`
)

// MaxErrorBytes bounds the text of an isError result kept in a toolError
// failure (the agent loop's own bound, agent.MaxToolErrorBytes, is the same).
const MaxErrorBytes = 2048

// ToolNotFound is the payload of a ChannelToolNotFound failure.
type ToolNotFound struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// SchemaDrift is the payload of a ChannelSchemaDrift failure: the pin the
// call carried and the hash of the schema the server lists now.
type SchemaDrift struct {
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	Pinned  string `json:"pinned"`
	Current string `json:"current"`
}

// ToolError is the payload of a ChannelToolError failure.
type ToolError struct {
	Message string `json:"message"`
}

// Invocation is the input of the mcp.invoke effect, and so what a call's
// STEP_STARTED records: which tool, with which arguments, against which
// schema pin. A replay reads the call from it; nothing else about the call
// (no credential) is recorded.
type Invocation struct {
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	SchemaHash string          `json:"schemaHash"`
}

// InvocationError refuses an Invocation before the server is asked: it is
// malformed, names a server no client is registered for, or does not match
// the tool id the step was recorded (and authorized) under. It is an
// untyped failure of the step.
type InvocationError struct {
	Server string
	Tool   string
	Reason string
}

func (e *InvocationError) Error() string {
	return fmt.Sprintf("mcp: invocation of %q on server %q: %s", e.Tool, e.Server, e.Reason)
}

// ErrToolNotFound is returned by Client.Tool for a tool the server does not
// list.
var ErrToolNotFound = errors.New("mcp: no such tool")

// Effects returns the mcp.invoke effect over clients, for
// effect.NewRegistry (loom.Config.Effects). A call:
//   - decodes its Invocation and checks it names the tool of the step's tool
//     id, "mcp.invoke:<server>/<tool>", so a grant or policy on that id
//     governs exactly that tool (*InvocationError otherwise, as for an
//     unknown server or malformed input; the server is not asked);
//   - verifies the tool still exists with the pinned schema (see Client):
//     loom.Fail on ChannelToolNotFound or ChannelSchemaDrift;
//   - calls the tool with the arguments as recorded. Its output is the
//     result's structured content when there is any; otherwise its text
//     content, as one JSON string (parts joined by "\n"); otherwise (images,
//     audio, resources) the content list in MCP's JSON form. An isError
//     result fails on ChannelToolError with its text. A protocol error (the
//     server refusing the call) re-lists first, so a tool removed or changed
//     before its notification arrived still fails typed; otherwise it, like
//     a transport failure, is untyped (retried under a retry policy, and
//     re-run on recovery).
//
// Two clients with one name are a wiring mistake: Effects panics.
func Effects(clients ...*Client) map[string]effect.Func {
	byName := make(map[string]*Client, len(clients))
	for _, c := range clients {
		if _, dup := byName[c.name]; dup {
			panic("mcp: two clients for server " + c.name)
		}
		byName[c.name] = c
	}
	return map[string]effect.Func{EffectName: func(ec *effect.Context, input json.RawMessage) (json.RawMessage, error) {
		var inv Invocation
		if err := json.Unmarshal(input, &inv); err != nil {
			return nil, &InvocationError{Reason: "the input is not an Invocation: " + err.Error()}
		}
		c, ok := byName[inv.Server]
		if !ok {
			return nil, &InvocationError{Server: inv.Server, Tool: inv.Tool, Reason: "no client is registered for the server"}
		}
		if err := checkInvocation(ec.ToolID, inv); err != nil {
			return nil, err
		}
		return c.invoke(ec, inv)
	}}
}

// checkInvocation refuses an Invocation that is not the tool its step was
// recorded under, or has no pin or object arguments.
func checkInvocation(toolID string, inv Invocation) error {
	refuse := func(reason string) error { return &InvocationError{Server: inv.Server, Tool: inv.Tool, Reason: reason} }
	switch {
	case inv.Tool == "":
		return refuse("it names no tool")
	case toolID != ToolID(inv.Server, inv.Tool):
		return refuse(fmt.Sprintf("the step's tool id is %q, not %q", toolID, ToolID(inv.Server, inv.Tool)))
	case inv.SchemaHash == "":
		return refuse("it carries no schema pin")
	case len(inv.Arguments) > 0 && !isObject(inv.Arguments):
		return refuse("the arguments are not a JSON object")
	}
	return nil
}

// invoke verifies the pin and calls the tool.
func (c *Client) invoke(ec *effect.Context, inv Invocation) (json.RawMessage, error) {
	ctx := ec.Ctx()
	if err := c.verify(ctx, inv.Tool, inv.SchemaHash); err != nil {
		return nil, err
	}
	args := inv.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	res, err := c.session.CallTool(ctx, &sdk.CallToolParams{Name: inv.Tool, Arguments: args})
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			// The server refused the call itself: the tool may have gone or
			// changed before its notification reached the cache. Re-list, so
			// that is a typed answer rather than a re-run.
			if verr := c.verifyListed(ctx, inv.Tool, inv.SchemaHash); verr != nil {
				return nil, verr
			}
		}
		return nil, fmt.Errorf("mcp: calling %q on server %q: %w", inv.Tool, c.name, err)
	}
	return output(res)
}

// output maps a call's result to the step's output (see Effects).
func output(res *sdk.CallToolResult) (json.RawMessage, error) {
	if res.IsError {
		msg := text(res.Content)
		if len(msg) > MaxErrorBytes {
			msg = msg[:MaxErrorBytes] + "…"
		}
		return nil, loom.Fail(ChannelToolError, ToolError{Message: msg})
	}
	var v any = res.Content
	switch {
	case res.StructuredContent != nil:
		v = res.StructuredContent
	case allText(res.Content):
		v = text(res.Content)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("mcp: encoding the tool's result: %w", err)
	}
	return out, nil
}

// text joins the text parts of content.
func text(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func allText(content []sdk.Content) bool {
	for _, c := range content {
		if _, ok := c.(*sdk.TextContent); !ok {
			return false
		}
	}
	return true
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
