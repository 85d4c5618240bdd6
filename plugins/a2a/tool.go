package a2a

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/loom-kernel/loom/agent"
)

// toolSchema is the argument schema of an agent tool: the message, and
// the ids of a remote task to continue.
const toolSchema = `{"type":"object","required":["message"],"additionalProperties":false,"properties":{` +
	`"message":{"type":"string","description":"The message to send to the remote agent."},` +
	`"taskId":{"type":"string","description":"To answer a remote task that asked for input (state input-required): its taskId."},` +
	`"contextId":{"type":"string","description":"The contextId of the remote task being answered."}}}`

// toolArgs are a model's arguments to an agent tool.
type toolArgs struct {
	Message   string `json:"message"`
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
}

// AgentTool is the remote agent as a tool of an agent loop: an
// agent.EffectTool named after the peer (its sanitized card name),
// described by its card, whose calls run the a2a.send effect under the
// tool id "a2a.send:<name>" — register Effects(peer) in
// loom.Config.Effects. The model passes {"message", "taskId"?,
// "contextId"?}; the call records SendInput{agent, message, …} as its
// input and the remote task's Outcome as its result. An input-required
// outcome does not park the run: it is returned to the model as the
// tool's result (state "input-required", the remote's question in text,
// the taskId and contextId to answer with), and the model answers by
// calling the tool again with that taskId — or asks its own user. opts
// are passed on (agent.NeedsApproval, agent.NonIdempotent…).
func AgentTool(peer *Peer, opts ...agent.ToolOption) *agent.Tool {
	shape := agent.EffectInput(func(args json.RawMessage) (any, error) {
		var a toolArgs
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, fmt.Errorf("a2a: tool %q: decoding the arguments: %w", peer.name, err)
		}
		return SendInput{Agent: peer.name, Message: a.Message, TaskID: a.TaskID, ContextID: a.ContextID}, nil
	})
	return agent.EffectTool(peer.name, toolDescription(peer), peer.ToolID(), json.RawMessage(toolSchema),
		append([]agent.ToolOption{shape}, opts...)...)
}

// MaxToolDescriptionBytes bounds an agent tool's description.
const MaxToolDescriptionBytes = 2048

// toolDescription describes the remote agent from its card: its
// description, then its skills.
func toolDescription(p *Peer) string {
	var b strings.Builder
	b.WriteString("Send a message to the remote agent " + p.name + ".")
	if d := strings.TrimSpace(p.card.Description); d != "" {
		b.WriteString(" " + d)
	}
	for _, s := range p.card.Skills {
		line := strings.TrimSpace(s.Name)
		if d := strings.TrimSpace(s.Description); d != "" {
			line += ": " + d
		}
		if line != "" {
			b.WriteString("\nSkill " + line)
		}
	}
	b.WriteString("\nIf the result's state is input-required, answer its question by calling this tool again with its taskId and contextId.")
	d := b.String()
	if len(d) > MaxToolDescriptionBytes {
		cut := MaxToolDescriptionBytes
		for cut > 0 && !runeStart(d[cut]) {
			cut--
		}
		d = d[:cut]
	}
	return d
}
