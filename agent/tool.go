package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/invopop/jsonschema"

	"github.com/loom-kernel/loom"
	"github.com/loom-kernel/loom/internal/schema"
	"github.com/loom-kernel/loom/llm"
)

// Tool is a function the agent's model may call. Each call is a durable
// step: a completed call is served from the log on replay and never runs
// again. Build one with NewTool (a typed Go function) or EffectTool (an
// effect registered in loom.Config.Effects).
type Tool struct {
	name        string
	description string
	schemaJSON  json.RawMessage
	toolID      string
	invoke      func(ctx context.Context, args json.RawMessage) (any, error)
	simulate    func(ctx context.Context, args json.RawMessage) (any, error)
	shape       func(args json.RawMessage) (any, error)
	approval    bool
	nonIdem     bool
	readOnly    bool
	channels    map[string]string

	once     sync.Once
	compiled *schema.Schema
	err      error
}

// ToolOption configures a Tool.
type ToolOption func(*Tool)

// NeedsApproval parks the run before each call of the tool on a gate only
// an answer for that exact call can open (see Approval).
func NeedsApproval() ToolOption { return func(t *Tool) { t.approval = true } }

// NonIdempotent marks a tool whose effect must not silently run twice: its
// call is durably started before it runs, and a crash in between parks the
// run in doubt (K9) instead of calling it again.
func NonIdempotent() ToolOption { return func(t *Tool) { t.nonIdem = true } }

// ReadOnly marks a tool without side effects (it runs for real in a
// simulated fork).
func ReadOnly() ToolOption { return func(t *Tool) { t.readOnly = true } }

// InputSchema replaces the schema derived from the input type.
func InputSchema(jsonSchema json.RawMessage) ToolOption {
	return func(t *Tool) { t.schemaJSON = append(json.RawMessage(nil), jsonSchema...) }
}

// EffectInput shapes what a call passes its effect, and records as the
// step's input, from the model's arguments (checked against the tool's
// schema first): an MCP tool wraps them with its server, its name and its
// schema pin, so one registered effect serves every tool and a replay
// reads which tool was called from the log. Without it the arguments are
// the input. An error from shape ends the run (it is the code's, not the
// model's).
func EffectInput(shape func(args json.RawMessage) (any, error)) ToolOption {
	return func(t *Tool) { t.shape = shape }
}

// ErrorChannel declares a typed failure channel of the tool: a call that
// fails on it (returning loom.Fail(channel, payload)) ends the run with that
// *loom.TypedFailure, for the flow to catch. Any other failure of a tool is
// fed back to the model as an error result.
func ErrorChannel(channel, jsonSchema string) ToolOption {
	return func(t *Tool) {
		if t.channels == nil {
			t.channels = map[string]string{}
		}
		t.channels[channel] = jsonSchema
	}
}

// Simulation sets what a call of the tool does in a simulated fork
// (loom.SimulateFork) instead of its effect. A tool with neither a
// simulation nor ReadOnly ends a simulated run with
// *loom.SimulationRefusedError when the model calls it.
func Simulation[In, Out any](fn func(ctx context.Context, in In) (Out, error)) ToolOption {
	return func(t *Tool) { t.simulate = typedTool(fn) }
}

// typedTool adapts a typed function to the raw arguments of a call.
func typedTool[In, Out any](fn func(ctx context.Context, in In) (Out, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding the arguments: %w", err)
		}
		return fn(ctx, in)
	}
}

// NewTool defines a tool from a typed function. Its input schema is
// derived from In (struct fields by their json names; `jsonschema` tags
// add descriptions and constraints) unless InputSchema gives one.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...ToolOption) *Tool {
	t := &Tool{name: name, description: description, toolID: "tool:" + name, invoke: typedTool(fn)}
	for _, o := range opts {
		o(t)
	}
	if t.schemaJSON == nil {
		t.schemaJSON, t.err = SchemaFor[In]()
	}
	return t
}

// EffectTool defines a tool whose calls run the effect registered under
// toolID in loom.Config.Effects, with inputSchema as its argument schema.
func EffectTool(name, description, toolID string, inputSchema json.RawMessage, opts ...ToolOption) *Tool {
	t := &Tool{name: name, description: description, toolID: toolID, schemaJSON: append(json.RawMessage(nil), inputSchema...)}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Name is the name the model calls the tool by.
func (t *Tool) Name() string { return t.name }

// Definition is the tool as the model sees it.
func (t *Tool) Definition() llm.Tool {
	return llm.Tool{Name: t.name, Description: t.description, InputSchema: t.schemaJSON}
}

// validate checks a call's arguments against the tool's schema and returns
// them as parsed (exact member names, numbers kept).
func (t *Tool) validate(args json.RawMessage) (json.RawMessage, error) {
	if err := t.schemaErr(); err != nil {
		return nil, fmt.Errorf("agent: tool %q: its input schema: %w", t.name, err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return t.compiled.Parse(args)
}

// schemaErr compiles the tool's input schema, once for every run that
// shares the tool, and says why the tool is unusable (a bad schema, or an
// option's error), if it is. Read t.err only through it: runs on several
// goroutines validate one *Tool.
func (t *Tool) schemaErr() error {
	t.once.Do(func() {
		if t.err == nil {
			t.compiled, t.err = schema.Compile(string(t.schemaJSON))
		}
	})
	return t.err
}

// task is the durable step of one call.
func (t *Tool) task(stepID string) *loom.Task {
	task := &loom.Task{ID: stepID, Kind: "tool", ToolID: t.toolID, NonIdempotent: t.nonIdem, ReadOnly: t.readOnly,
		Errors: map[string]string{channelToolError: toolErrorSchema}}
	for ch, s := range t.channels { //loom:order-independent map into map
		task.Errors[ch] = s
	}
	task.Invoke = t.recorded(t.invoke)
	task.Simulate = t.recorded(t.simulate)
	return task
}

// recorded wraps fn so its failure is recorded as a toolError outcome.
func (t *Tool) recorded(fn func(context.Context, json.RawMessage) (any, error)) func(context.Context, json.RawMessage) (any, error) {
	if fn == nil {
		return nil
	}
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		out, err := fn(ctx, args)
		return out, asToolError(ctx, err, t.channels)
	}
}

// channelToolError is the channel a tool's own failure is recorded on, so
// that replay serves what the model was told instead of calling the tool
// again.
const channelToolError = "toolError"

const toolErrorSchema = `{"type":"object","required":["message"],"properties":{"message":{"type":"string"}}}`

// MaxToolErrorBytes bounds the error text a failed tool feeds back.
const MaxToolErrorBytes = 2048

// asToolError records a tool's failure as a toolError outcome — except a
// failure on one of its declared channels, which stays itself, and the end
// of the run's context, which is no answer at all.
func asToolError(ctx context.Context, err error, channels map[string]string) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if tf, ok := asTyped(err); ok {
		if _, declared := channels[tf.Channel]; declared {
			return err
		}
	}
	msg := err.Error()
	if len(msg) > MaxToolErrorBytes {
		msg = msg[:MaxToolErrorBytes] + "…"
	}
	return loom.Fail(channelToolError, map[string]string{"message": msg})
}

// SchemaFor derives the JSON Schema of a tool's input type T: an inline
// object schema (no $ref, no $schema) with the json field names, required
// fields unless omitempty, and no additional properties.
func SchemaFor[T any]() (json.RawMessage, error) {
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.Reflect(new(T))
	s.Version = ""
	s.ID = ""
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("agent: deriving the input schema: %w", err)
	}
	return raw, nil
}
