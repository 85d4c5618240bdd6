package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/loom-kernel/loom"
)

// Channels maps each channel an MCP call may fail on to its payload
// schema: what Task declares, and what a flow may catch.
func Channels() map[string]string {
	return map[string]string{
		ChannelToolNotFound: ToolNotFoundSchema,
		ChannelSchemaDrift:  SchemaDriftSchema,
		ChannelToolError:    ToolErrorSchema,
	}
}

// Task is the durable step of one call of tool under stepID, for a plain
// flow: kind "tool", tool id "mcp.invoke:<server>/<tool>", the three
// channels of Channels declared, and no Invoke of its own, so it runs the
// mcp.invoke effect registered in loom.Config.Effects (a runtime without it
// fails the step untyped). Its input is an Invocation (Call builds one).
func Task(tool Tool, stepID string) *loom.Task {
	return &loom.Task{ID: stepID, Kind: "tool", ToolID: tool.ID(), Errors: Channels()}
}

// ArgumentsError refuses a Call whose arguments are not a JSON object,
// before anything is recorded.
type ArgumentsError struct {
	Tool   string
	Reason string
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("mcp: the arguments of %q: %s", e.Tool, e.Reason)
}

// Call runs one call of tool with args (encoded as JSON; nil is {}) as the
// durable step stepID and returns its output (see Effects for the
// mapping). A completed call, or one that failed typed, is served from the
// log on replay and never reaches the server again. It fails with a
// *loom.TypedFailure on ChannelToolNotFound, ChannelSchemaDrift or
// ChannelToolError, with *loom.StepError for an untyped failure, and with
// *ArgumentsError, recording nothing, when args do not encode as an object.
func Call(ctx *loom.Context, stepID string, tool Tool, args any) (json.RawMessage, error) {
	raw := json.RawMessage("{}")
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, &ArgumentsError{Tool: tool.Name, Reason: err.Error()}
		}
		if string(b) != "null" {
			raw = b
		}
	}
	if !isObject(raw) {
		return nil, &ArgumentsError{Tool: tool.Name, Reason: "not a JSON object"}
	}
	return ctx.Execute(Task(tool, stepID), tool.invocation(raw))
}

// invocation is the recorded input of a call of t with args.
func (t Tool) invocation(args json.RawMessage) Invocation {
	return Invocation{Server: t.Server, Tool: t.Name, Arguments: args, SchemaHash: t.SchemaHash}
}
