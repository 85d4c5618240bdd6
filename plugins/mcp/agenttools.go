package mcp

import (
	"encoding/json"
	"strings"

	"github.com/loom-kernel/loom/agent"
	"github.com/loom-kernel/loom/event"
)

// MaxModelNameBytes bounds a model-facing tool name (the tightest of the
// model APIs' limits).
const MaxModelNameBytes = 64

// AgentTools turns listed tools into agent tools, one agent.EffectTool per
// tool: named ModelName(tool), described and schema'd as the server lists
// it, running the mcp.invoke effect under the tool id
// "mcp.invoke:<server>/<tool>" with the model's arguments (checked against
// the schema by the agent first) wrapped into the pinned Invocation. An
// isError result, or an untyped failure, is fed back to the model as an
// error result; schemaDrift and toolNotFound are declared channels, so
// they end the run with that *loom.TypedFailure for the flow to catch. opts
// (agent.NeedsApproval, agent.NonIdempotent, ...) apply to every tool.
func AgentTools(tools []Tool, opts ...agent.ToolOption) []*agent.Tool {
	out := make([]*agent.Tool, 0, len(tools))
	for _, t := range tools {
		t := t
		o := append([]agent.ToolOption{
			agent.EffectInput(func(args json.RawMessage) (any, error) { return t.invocation(args), nil }),
			agent.ErrorChannel(ChannelSchemaDrift, SchemaDriftSchema),
			agent.ErrorChannel(ChannelToolNotFound, ToolNotFoundSchema),
		}, opts...)
		out = append(out, agent.EffectTool(ModelName(t), t.Description, t.ID(), t.InputSchema, o...))
	}
	return out
}

// ModelName is the name a model calls tool by: "<server>_<tool>", valid for
// every model API (letters, digits, '_' and '-', starting with a letter or
// '_', at most MaxModelNameBytes). It depends on the tool alone, so a
// replay in another process names it the same. When the plain name would
// not be valid, each invalid character becomes '_', a leading digit or '-'
// gets a '_' in front, and a suffix "_<8 hex of sha256(tool id)>" keeps two
// tools that map to the same characters apart (shortening the name to fit
// when needed). Two tools whose plain names collide ("a_b"/"c" and
// "a"/"b_c") are refused by agent.Config.Validate as duplicates.
func ModelName(tool Tool) string {
	plain := tool.Server + "_" + tool.Name
	var b strings.Builder
	lossy := len(plain) > MaxModelNameBytes
	for _, r := range plain {
		if nameRune(r) {
			b.WriteRune(r)
			continue
		}
		b.WriteByte('_')
		lossy = true
	}
	name := b.String()
	if c := name[0]; c >= '0' && c <= '9' || c == '-' {
		name, lossy = "_"+name, true
	}
	if !lossy {
		return name
	}
	suffix := "_" + strings.TrimPrefix(event.SHA256([]byte(tool.ID())), "sha256:")[:8]
	if len(name)+len(suffix) > MaxModelNameBytes {
		name = name[:MaxModelNameBytes-len(suffix)]
	}
	return name + suffix
}

// nameRune is a character every model API accepts in a tool name.
func nameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}
